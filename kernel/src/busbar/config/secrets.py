"""Secret references: ``{ env: VAR }``, ``{ file: PATH }``, ``{ module: <secret-plugin>, settings }``.

Not interpolation: resolved once at boot by ``resolve_secret``. A reference that resolves to an
empty value is legal (the lane starts and will fail upstream auth; a boot warning says so).

Raises ``SecretError`` (one-line, names the key path) for an unreadable file, or a module
reference when no secret plugin can serve it.

Source: seeds 001 "providers" (api_key), "tls".
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from busbar.config.schema import EnvRef, FileRef, ModuleRef, SecretRef


class SecretError(Exception):
    """A secret reference could not be resolved; ``str(e)`` is the operator-facing line."""


ModuleResolver = Callable[[str, dict], str]


def resolve_secret(ref: SecretRef, env: Mapping[str, str], *, where: str,
                   module_resolver: ModuleResolver | None = None) -> str:
    """Resolve one reference to its value (str). ``where`` is the key path used in errors."""
    if isinstance(ref, EnvRef):
        return env.get(ref.env, "")
    if isinstance(ref, FileRef):
        try:
            return Path(ref.file).read_text("utf-8").strip()
        except OSError as e:
            raise SecretError(f"{where}: cannot read secret file {ref.file}: {e.strerror}") from None
    if isinstance(ref, ModuleRef):
        if module_resolver is None:
            raise SecretError(f"{where}: {{ module: {ref.module} }} needs a loaded kind: secret plugin; "
                              f"set plugins.enabled: true and install it in plugins.dir")
        return module_resolver(ref.module, ref.settings)
    raise SecretError(f"{where}: not a secret reference")
