"""Secret references: ``{ env: VAR }``, ``{ file: PATH }``, ``{ module: <secret-plugin>, settings }``.

Not interpolation: resolved once at boot by :func:`resolve_secret`. A reference that cannot be resolved
(an unset variable, an unreadable file) or that resolves to an empty or blank value is a boot error
naming the variable (or file) and the key path, never a lane that starts with an empty credential
(docs/configuration.md#secret-references-and-interpolation).

``read_file`` (``path -> text``) is injectable so ``--validate`` and tests read secret files through
one seam; the default reads the real file system (UTF-8). Reading is the only side effect.

Raises ``SecretError`` (one-line, names the key path) for an unset or empty variable, an unreadable
or empty file, or a module reference when no secret plugin can serve it (or it serves an empty value).

Source: docs/config-at-a-glance.md#providers (api_key), docs/config-at-a-glance.md#tls, docs/config-at-a-glance.md#auth
(signing_key, admin-tokens token).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from busbar.config.schema_base import EnvRef, FileRef, ModuleRef

ModuleResolver = Callable[[str, dict], str]
FileReader = Callable[[str], str]


class SecretError(Exception):
    """A secret reference could not be resolved; ``str(e)`` is the operator-facing line."""


def read_text_file(path: str) -> str:
    """The default :data:`FileReader`: the file's UTF-8 text. Raises ``OSError``/``UnicodeError``."""
    return Path(path).read_text("utf-8")


def resolve_secret(ref: object, env: Mapping[str, str], *, where: str,
                   module_resolver: ModuleResolver | None = None,
                   read_file: FileReader | None = None) -> str:
    """Resolve one reference to its value (str). ``where`` is the key path used in errors.

    Args:
        ref: an :class:`EnvRef`, :class:`FileRef` or :class:`ModuleRef`.
        env: environment for ``{ env: VAR }``.
        where: key path for messages, ``providers.openai.api_key``.
        module_resolver: ``(module, settings) -> value`` from the plugin loader; None = no secret
            plugins loaded.
        read_file: file reader for ``{ file: PATH }``; default :func:`read_text_file`.

    Returns:
        the value, never empty or blank; a file's surrounding whitespace is trimmed.

    Raises:
        SecretError: unset or empty variable, unreadable or empty file, a module reference with no
            resolver or resolving to an empty value.
    """
    if isinstance(ref, EnvRef):
        value = env.get(ref.env)
        if value is None:
            raise SecretError(f"{where}: environment variable {ref.env} is not set; export {ref.env} "
                              f"(or point the reference at {{ file: /path }})")
        if not value.strip():
            raise SecretError(f"{where}: environment variable {ref.env} is empty; set {ref.env} to the "
                              f"secret")
        return value
    if isinstance(ref, FileRef):
        try:
            value = (read_file or read_text_file)(ref.file).strip()
        except OSError as e:
            raise SecretError(f"{where}: cannot read secret file {ref.file}: "
                              f"{e.strerror or e}; fix the path or its permissions") from None
        except UnicodeError:
            raise SecretError(f"{where}: secret file {ref.file} is not UTF-8 text") from None
        if not value:
            raise SecretError(f"{where}: secret file {ref.file} is empty; write the secret into it")
        return value
    if isinstance(ref, ModuleRef):
        if module_resolver is None:
            raise SecretError(f"{where}: {{ module: {ref.module} }} needs a loaded kind: secret plugin; "
                              f"set plugins.enabled: true and install it in plugins.dir")
        value = module_resolver(ref.module, ref.settings)
        if not value.strip():
            raise SecretError(f"{where}: secret plugin {ref.module} resolved an empty value; fix its "
                              f"settings or the secret it points at")
        return value
    raise SecretError(f"{where}: not a secret reference")
