"""Implementation of :mod:`busbar_sdk.testing` (see there)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from busbar_sdk._archive import read_artifact
from busbar_sdk._binding import PluginBinding, bind_plugin
from busbar_sdk._errors import ArtifactError, SigningError
from busbar_sdk._importer import PluginImporter
from busbar_sdk._manifest import Manifest
from busbar_sdk._pack import build_wheel, pack_artifact
from busbar_sdk._requirements import unmet_requirements
from busbar_sdk._signing import generate_signing_key, verify_manifest_signature
from busbar_sdk._wheel import extract_wheel

__all__ = [
    "InstanceUnderTest",
    "PluginUnderTest",
    "assert_hook_conformance",
    "decide_payload",
    "load_packed",
    "pack",
    "throwaway_key",
]

_IMPORTER = PluginImporter()


def throwaway_key() -> tuple[str, str]:
    """A fresh ``(private_seed_hex, public_key_hex)`` pair for one test run."""
    return generate_signing_key()


def pack(wheel_or_project: str | Path, *, out: str | Path, name: str, alias: str, kind: str,
         version: str = "1.0.0", publisher: str = "test", signing_key: str | None = None,
         allow_unsigned: bool = False, needs_prompt: str = "no", needs_user: str = "no",
         settings_schema: str | None = None) -> Path:
    """Pack a ``.whl`` or a project directory (built with ``pip wheel``) into ``out``.

    Raises:
        BuildError, ArtifactError, SigningError: as ``busbar-plugin-pack pack``.
    """
    src, out = Path(wheel_or_project), Path(out)
    with tempfile.TemporaryDirectory(prefix="busbar-test-pack-") as tmp:
        wheel = src if src.is_file() else build_wheel(src, Path(tmp))
        data = pack_artifact(wheel_name=wheel.name, wheel_bytes=wheel.read_bytes(), name=name, alias=alias,
                             kind=kind, version=version, publisher=publisher, signing_key=signing_key,
                             allow_unsigned=allow_unsigned, needs_prompt=needs_prompt, needs_user=needs_user,
                             settings_schema=settings_schema)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


class InstanceUnderTest:
    """One opened instance; :meth:`call` is ``busbar_call`` on its handle."""

    def __init__(self, binding: PluginBinding, handle: object) -> None:
        self.binding, self.handle = binding, handle

    def call(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Send one payload; returns the reply dict (raises whatever the plugin raises)."""
        reply = self.binding.call(self.handle, payload)
        if type(reply) is not dict:
            raise AssertionError(f"busbar_call returned {type(reply).__name__}, not a dict")
        return reply

    def configure(self, settings: dict[str, Any], settings_version: int = 1, hook: str = "test") -> dict[str, Any]:
        """Send ``configure`` (returns the reply; a conforming hook acks the exact version)."""
        return self.call({"configure": {"hook": hook, "settings": settings, "settings_version": settings_version,
                                        "busbar_version": "1.5.0"}})

    def close(self) -> None:
        self.binding.close(self.handle)


class PluginUnderTest:
    """A loaded plugin: manifest, binding, and the directory its wheel was unpacked into."""

    def __init__(self, manifest: Manifest, binding: PluginBinding, directory: Path, owner: str) -> None:
        self.manifest, self.binding, self.directory, self._owner = manifest, binding, directory, owner

    def open(self, settings: dict[str, Any] | None = None) -> InstanceUnderTest:
        return InstanceUnderTest(self.binding, self.binding.open(settings or {}))

    def unload(self) -> None:
        """Forget the plugin's modules and delete its directory."""
        _IMPORTER.forget(self._owner)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.unload()


def load_packed(tarball: str | Path, *, public_key: str | None, workdir: str | Path | None = None) -> PluginUnderTest:
    """Load a packed plugin as the kernel does (see the package docstring).

    Args:
        tarball: the ``.tar.gz``.
        public_key: the 64-hex key the signature must verify with; ``None`` accepts an unsigned
            artifact only (a signed one must be checked).
        workdir: where to unpack (default: a new temporary directory).

    Raises:
        ArtifactError: structurally invalid, or a required distribution is missing;
        SigningError: the signature does not verify;
        BindingError: import, ABI or kind cross-check failed.
    """
    artifact = read_artifact(Path(tarball).read_bytes())
    m = artifact.manifest
    if public_key is not None and not verify_manifest_signature(artifact.manifest_obj, public_key):
        raise SigningError(f"{m.name}: the signature does not verify with the given public key")
    if public_key is None and m.signature:
        raise SigningError(f"{m.name} is signed; pass its public key")
    unmet = unmet_requirements(m.requires_dist)
    if unmet:
        raise ArtifactError(f"{m.name}: {unmet[0]}")
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="busbar-test-load-"))
    base.mkdir(parents=True, exist_ok=True)
    directory = base / f"{m.name}-{m.version}-{m.sha256[:12]}"
    if directory.exists():
        raise ArtifactError(f"{directory} exists; unload the previous copy first")
    extract_wheel(artifact.wheel_bytes, directory)
    owner = f"{m.name}@{m.sha256[:16]}"
    _, module, attr = artifact.wheel.entry_point
    try:
        obj = _IMPORTER.load(owner, directory, artifact.wheel.top_level, module, attr)
        binding = bind_plugin(obj, name=m.name, expected_kind=m.kind)
    except BaseException:
        _IMPORTER.forget(owner)
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return PluginUnderTest(m, binding, directory, owner)


def decide_payload(*, candidates: int | list[dict[str, Any]] = 2, op: str = "decide", pool: str = "test",
                   **request: Any) -> dict[str, Any]:
    """A well-formed per-request message; ``candidates=N`` makes ``N`` plain members."""
    cands = ([{"idx": i, "model": f"model-{i}", "provider": "mock", "weight": 1, "available_concurrency": 8}
              for i in range(candidates)] if isinstance(candidates, int) else candidates)
    req = {"request_id": "req-test", "pool": pool, "ingress_protocol": "openai", "message_count": 1,
           "has_tools": False, "total_chars": 12, "stream": False}
    req.update(request)
    return {"op": op, "request": req, "candidates": cands, "context": {}}


def assert_hook_conformance(instance: InstanceUnderTest) -> None:
    """The wire rules every hook must keep (docs/hooks.md#what-a-hook-receives).

    Unknown ops and unknown management keys are answered ``{}``; ``notify`` is never answered;
    ``configure`` acks the exact ``settings_version``; ``describe`` and ``status`` reply ``{}`` or
    their envelope; ``decide`` on a message with unknown extra fields returns a dict.
    """
    assert instance.call({"op": "no-such-op-yet", "request": {}}) == {}, "unknown op must be answered {}"
    assert instance.call({"no_such_management_key": True}) == {}, "unknown management key must be answered {}"
    assert instance.call(decide_payload(op="notify")) == {}, "notify must not be answered"
    ack = instance.configure({}, settings_version=7)
    assert ack == {"ack": {"settings_version": 7}}, f"configure must ack the exact version, got {ack}"
    described = instance.call({"describe": True})
    assert described == {} or set(described) == {"schema"}, f"describe replies {{}} or {{schema}}, got {described}"
    status = instance.call({"status": True})
    assert status == {} or "status" in status, f"status replies {{}} or {{status: ...}}, got {status}"
    payload = decide_payload()
    payload["request"]["a_field_from_the_future"] = 1
    payload["future_member"] = {"x": 1}
    assert isinstance(instance.call(payload), dict)
