"""Packing: build a wheel from a project, write the manifest, sign it, self-check the result.

The logic behind ``busbar-plugin-pack pack`` and ``busbar_sdk.testing.pack``; the CLI only parses
arguments. The result is checked with :func:`read_artifact`, the loader's own structural
validation, before anyone writes it to disk.

The pack tool is the CLI only; see docs/plugin-format.md.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from busbar_sdk._archive import read_artifact, wheel_sha256, write_artifact
from busbar_sdk._errors import ArtifactError, BuildError, SigningError
from busbar_sdk._limits import DEFAULT_LIMITS, Limits
from busbar_sdk._manifest import Manifest, describe_validation_error, manifest_json_bytes
from busbar_sdk._signing import sign_manifest
from busbar_sdk._versions import SUPPORTED_ABI_VERSIONS
from busbar_sdk._wheel import inspect_wheel

__all__ = ["build_wheel", "build_wheels", "pack_artifact"]

_IGNORE = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".git", ".venv", "*.pyc")


_BACKEND_SCRIPT = r"""
import importlib, json, os, sys, tomllib
results = []
for src, out in json.loads(sys.argv[1]):
    os.chdir(src)
    system = {}
    if os.path.exists("pyproject.toml"):
        with open("pyproject.toml", "rb") as fh:
            system = tomllib.load(fh).get("build-system", {})
    spec = system.get("build-backend", "setuptools.build_meta:__legacy__")
    for entry in reversed(system.get("backend-path", [])):
        sys.path.insert(0, os.path.abspath(entry))
    module, _, attr = spec.partition(":")
    try:
        backend = importlib.import_module(module)
    except ImportError as exc:
        print("@@BUSBAR-ERROR@@ the build backend %s is not installed (%s); pip install %s"
              % (spec, exc, module.split(".")[0]))
        sys.exit(3)
    for part in filter(None, attr.split(".")):
        backend = getattr(backend, part)
    os.makedirs(out, exist_ok=True)
    results.append(os.path.join(out, backend.build_wheel(out)))
print("@@BUSBAR-WHEELS@@" + json.dumps(results))
"""


def build_wheels(projects: Sequence[Path], out_dir: Path) -> list[Path]:
    """Build one wheel per project directory, offline, in one subprocess.

    Like ``python -m build --wheel --no-isolation``: each project is copied to a temporary
    directory (so no ``build/`` or ``*.egg-info`` is left in the source tree) and its declared
    PEP 517 backend (``[build-system] build-backend``, default setuptools) is called directly
    from the current environment, which must already hold the backend (setuptools and wheel are
    dependencies of ``busbar-plugin-pack``). Nothing is downloaded.

    Returns:
        The wheel paths in ``out_dir``, in project order.

    Raises:
        BuildError: a directory without ``pyproject.toml``/``setup.py``, a missing backend, or a
            failed build (the tail of its output attached).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for project in projects:
        if not (Path(project) / "pyproject.toml").is_file() and not (Path(project) / "setup.py").is_file():
            raise BuildError(f"{project} is neither a .whl file nor a project directory with a pyproject.toml")
    with tempfile.TemporaryDirectory(prefix="busbar-pack-") as tmp:
        jobs = []
        for i, project in enumerate(projects):
            src = Path(tmp) / f"src{i}"
            shutil.copytree(project, src, ignore=_IGNORE, symlinks=True)
            jobs.append((str(src), str(Path(tmp) / f"out{i}")))
        env = dict(os.environ, PIP_NO_INDEX="1", PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run([sys.executable, "-c", _BACKEND_SCRIPT, json.dumps(jobs)],
                              capture_output=True, text=True, env=env, check=False)
        output = proc.stdout + proc.stderr
        marker = "@@BUSBAR-WHEELS@@"
        if proc.returncode != 0 or marker not in proc.stdout:
            errors = [ln.split("@@BUSBAR-ERROR@@ ", 1)[1] for ln in output.splitlines() if "@@BUSBAR-ERROR@@" in ln]
            tail = errors[0] if errors else " | ".join(output.strip().splitlines()[-6:])
            names = ", ".join(str(p) for p in projects)
            raise BuildError(f"building a wheel from {names} failed (exit {proc.returncode}): {tail}")
        built = json.loads(proc.stdout.rsplit(marker, 1)[1].strip().splitlines()[0])
        targets = []
        for wheel in built:
            target = out_dir / Path(wheel).name
            shutil.copyfile(wheel, target)
            targets.append(target)
    return targets


def build_wheel(project_dir: Path, out_dir: Path) -> Path:
    """Build the wheel of one project directory (see :func:`build_wheels`)."""
    return build_wheels([Path(project_dir)], Path(out_dir))[0]


def pack_artifact(*, wheel_name: str, wheel_bytes: bytes, name: str, alias: str, kind: str, version: str,
                  publisher: str, signing_key: str | None, allow_unsigned: bool = False,
                  needs_prompt: str = "no", needs_user: str = "no", settings_schema: str | None = None,
                  description: str = "", homepage: str = "", license: str = "",
                  abi_version: int | None = None, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Assemble, sign and self-check an artifact; returns the ``.tar.gz`` bytes.

    Args:
        wheel_name, wheel_bytes: the wheel (its ``Requires-Dist`` lines become ``requires_dist``).
        name, alias, kind, version, publisher: manifest identity (see :class:`Manifest`).
        signing_key: 64-hex ed25519 seed, or ``None``.
        allow_unsigned: write an unsigned artifact when ``signing_key`` is ``None``.
        needs_prompt, needs_user: the manifest ``needs`` grant ceiling.
        settings_schema: a JSON Schema document as a string, or ``None`` (absent).
        abi_version: defaults to the newest this sdk supports for ``kind``.

    Raises:
        SigningError: no key and not ``allow_unsigned``, or a malformed key.
        ArtifactError: any field invalid, or the result fails the loader's structural check.
    """
    if signing_key is None and not allow_unsigned:
        raise SigningError("no signing key: set BUSBAR_SIGN_KEY to a 64-hex private seed "
                           "(busbar-plugin-pack keygen), or pass --allow-unsigned to write an unsigned artifact")
    if kind not in SUPPORTED_ABI_VERSIONS:
        raise ArtifactError(f"kind {kind!r} is not one of {', '.join(SUPPORTED_ABI_VERSIONS)}")
    wheel = inspect_wheel(wheel_bytes, limits)
    fields: dict[str, object] = {
        "name": name, "alias": alias, "kind": kind, "version": version, "publisher": publisher,
        "abi_version": abi_version if abi_version is not None else SUPPORTED_ABI_VERSIONS[kind][1],
        "sha256": wheel_sha256(wheel_bytes), "signature": "",
        "description": description, "homepage": homepage, "license": license,
        "needs": {"prompt": needs_prompt, "user": needs_user},
        "requires_dist": list(wheel.requires_dist),
    }
    if settings_schema is not None:
        fields["settings_schema"] = settings_schema
    try:
        manifest = Manifest.model_validate(fields)
    except ValidationError as exc:  # one message format for packer and loader
        raise ArtifactError(describe_validation_error(exc)) from None
    if signing_key is not None:
        manifest = manifest.model_copy(update={"signature": sign_manifest(manifest.to_dict(), signing_key)})
    data = write_artifact(manifest_json_bytes(manifest), wheel_name, wheel_bytes)
    read_artifact(data, limits=limits)  # the loader's structural validation, on our own output
    return data
