"""Helpers shared by the plugin-system tests: throwaway plugin projects, the pack CLI run
in-process, ``plugins:`` configs and decide payloads."""
from __future__ import annotations

import contextlib
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from busbar.config.schema_plugins import PluginsConfig
from busbar_plugin_pack.cli import main as pack_main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "hooks" / "hello-order"

#: The head of a hook module written with plain pluggy markers: the marker, ``busbar_abi`` and
#: ``busbar_plugin_kind`` (no braces: it may precede a ``str.format`` template).
PLAIN_HOOK_HEAD = '''
import pluggy

hookimpl = pluggy.HookimplMarker("busbar")


@hookimpl
def busbar_abi():
    return 1


@hookimpl
def busbar_plugin_kind():
    return "hook"
'''

PLAIN_HOOK = '"""A hook written with plain pluggy markers and no sdk."""\n' + PLAIN_HOOK_HEAD + '''
VERSION = {version}


@hookimpl
def busbar_open(settings):
    return {{"settings": dict(settings)}}


@hookimpl
def busbar_call(handle, payload):
    if payload.get("op") == "decide":
        return {{"order": [c["idx"] for c in payload["candidates"]], "v": VERSION}}
    return {{}}


@hookimpl
def busbar_close(handle):
    handle["closed"] = True
'''

WRONG_KIND = '''
import pluggy

hookimpl = pluggy.HookimplMarker("busbar")


@hookimpl
def busbar_abi():
    return 1


@hookimpl
def busbar_plugin_kind():
    return "store"


@hookimpl
def busbar_open(settings):
    return object()


@hookimpl
def busbar_call(handle, payload):
    return {}
'''

GRANT_PROBE = '''
"""Echo what the kernel let through; rewrite on transform."""
from busbar_sdk import HookPlugin, Order, export_plugin


class Probe(HookPlugin):
    def decide(self, message):
        return {"order": [], "seen": sorted(k for k in ("system", "messages", "user")
                                            if getattr(message.request, k) is not None)}

    def transform(self, message):
        return {"rewrite": {"messages": [{"role": "user", "content": "short"}]}}


plugin = export_plugin(Probe)
'''

SECRET_PLUGIN = '''
from busbar_sdk import SecretPlugin, export_plugin
from busbar_sdk.models import SecretFailure


class Vault(SecretPlugin):
    def resolve(self, settings, deadline_ms):
        store = self.settings.get("values", {})
        if settings.get("path") in store:
            return store[settings["path"]]
        return SecretFailure(kind="not_found", message=f"no secret at {settings.get('path')}")


plugin = export_plugin(Vault)
'''

#: PLAIN_HOOK whose import leaves a trace: proves the kernel never imported it.
MARKER_HOOK = '''
import os
import pathlib

if os.environ.get("BUSBAR_TEST_IMPORT_MARKER"):
    pathlib.Path(os.environ["BUSBAR_TEST_IMPORT_MARKER"]).write_text("imported")
''' + PLAIN_HOOK.format(version=1)

PROJECTS: dict[str, tuple[str, str, str, str, tuple[str, ...]]] = {
    # key: (distribution, version, module, source, dependencies)
    "plain": ("plain-hook", "1.0.0", "plain_hook", PLAIN_HOOK.format(version=1), ()),
    "plain2": ("plain-hook", "2.0.0", "plain_hook", PLAIN_HOOK.format(version=2), ()),
    "wrongkind": ("wrong-kind", "1.0.0", "wrong_kind", WRONG_KIND, ()),
    "needsdist": ("needs-dist", "1.0.0", "needs_dist", PLAIN_HOOK.format(version=1),
                  ("busbar-nonexistent-dependency>=1",)),
    "probe": ("grant-probe", "1.0.0", "grant_probe", GRANT_PROBE, ("busbar-sdk",)),
    "secret": ("vault-secret", "1.0.0", "vault_secret", SECRET_PLUGIN, ("busbar-sdk",)),
    "marker": ("import-marker", "1.0.0", "import_marker", MARKER_HOOK, ()),
}


def write_project(root: Path, dist: str, version: str, module: str, source: str,
                  deps: tuple[str, ...] = ()) -> Path:
    """A minimal setuptools project exposing ``module`` as the ``busbar.plugins`` entry point."""
    (root / module).mkdir(parents=True, exist_ok=True)
    (root / module / "__init__.py").write_text(textwrap.dedent(source))
    dep_list = ", ".join(f'"{d}"' for d in deps)
    target = f"{module}:plugin" if "export_plugin(" in source else module
    (root / "pyproject.toml").write_text(textwrap.dedent(f'''
        [build-system]
        requires = ["setuptools>=61", "wheel"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{dist}"
        version = "{version}"
        requires-python = ">=3.11"
        dependencies = [{dep_list}]

        [project.entry-points."busbar.plugins"]
        {dist} = "{target}"

        [tool.setuptools]
        packages = ["{module}"]
    '''))
    return root


@contextlib.contextmanager
def env(**values: str | None) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_pack(args: list[str], sign_key: str | None) -> int:
    """``busbar-plugin-pack`` in-process with ``BUSBAR_SIGN_KEY`` set (or unset)."""
    with env(BUSBAR_SIGN_KEY=sign_key):
        return pack_main(args)


def make_cfg(keys: dict[str, tuple[str, str]] | None = None, *, publishers: tuple[str, ...] = ("acme",),
             **fields: Any) -> PluginsConfig:
    """A ``plugins:`` block, enabled, trusting ``publishers`` with their test keys."""
    trust = dict(fields.pop("trust", {}))
    if keys is not None:
        trust.setdefault("publishers", [{"name": p, "public_key": keys[p][1]} for p in publishers])
    return PluginsConfig.model_validate({"enabled": True, "dir": "plugins", "trust": trust, **fields})


def decide(n: int = 3, **request: Any) -> dict[str, Any]:
    req = {"request_id": "r1", "pool": "chat", "ingress_protocol": "openai", "message_count": 1,
           "has_tools": False, "total_chars": 5, "stream": False, **request}
    return {"op": "decide", "request": req, "candidates": [{"idx": i, "model": f"m{i}"} for i in range(n)],
            "context": {}}


def tar_members(path: Path) -> dict[str, bytes]:
    """The regular members of a tarball, name -> bytes."""
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(path.read_bytes()), mode="r:gz") as tf:
        return {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isreg()}  # type: ignore[union-attr]


def manifest_of(path: Path) -> dict[str, Any]:
    import json
    return json.loads(tar_members(path)["manifest.json"])


def wheel_of(path: Path) -> tuple[str, bytes]:
    (name, data), = [(n, b) for n, b in tar_members(path).items() if n != "manifest.json"]
    return name, data


def write_tar(path: Path, members: list[tuple[Any, bytes]]) -> Path:
    """Write a .tar.gz from ``(TarInfo or name, body)`` pairs, as given (no checks)."""
    import gzip
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.GNU_FORMAT) as tf:
        for info, body in members:
            if isinstance(info, str):
                info = tarfile.TarInfo(info)
                info.size = len(body)
            tf.addfile(info, io.BytesIO(body) if info.isreg() else None)
    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    return path


def forge(path: Path, manifest: dict[str, Any], wheel_name: str, wheel: bytes, seed: str | None, *,
          fix_sha: bool = True) -> Path:
    """A tarball with an arbitrary manifest (sha256 recomputed unless told not to), signed with
    ``seed`` through the sdk's signer: what a compromised publisher key could produce."""
    import hashlib
    import json

    from busbar_sdk.artifact import sign_manifest
    m = dict(manifest)
    if fix_sha:
        m["sha256"] = hashlib.sha256(wheel).hexdigest()
    m["signature"] = sign_manifest(m, seed) if seed else ""
    return write_tar(path, [("manifest.json", json.dumps(m, indent=2).encode()), (wheel_name, wheel)])


def zip_with(base: bytes, extra: list[tuple[Any, bytes]]) -> bytes:
    """A copy of wheel ``base`` with extra members appended (ZipInfo or name, body)."""
    import io
    import zipfile
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        for info, body in extra:
            dst.writestr(info, body)
    return out.getvalue()


def status_of(lines: list[str], file: str) -> str:
    """The STATUS cell of ``file``'s row in --list-plugins output."""
    header = lines[0]
    start = header.index("STATUS")
    (row,) = [ln for ln in lines[1:] if ln.startswith(file + " ")]
    return row[start:]


def signature_of(lines: list[str], file: str) -> str:
    header = lines[0]
    a, b = header.index("SIGNATURE"), header.index("STATUS")
    (row,) = [ln for ln in lines[1:] if ln.startswith(file + " ")]
    return row[a:b].strip()
