"""Shared building blocks of the config models: the strict base, secret references, vocabularies.

What lives here: :class:`Strict` (unknown keys rejected, no type coercion; the docstring under each
field becomes its JSON-Schema description, which ``docs/config-at-a-glance.md`` is generated
from), the secret reference union, the closed vocabularies validation checks against, and :func:`tagged_union` (a
discriminated union whose errors name one branch only). What must not: cross-reference checks
(``busbar.config.validate*``) and section models (``schema_*.py``).

Union branches are told apart by a callable discriminator, so a ``{ env: 5 }`` secret reference reports
``api_key.env: must be a string`` and never three confused branch errors. The branch tags appear in
pydantic error locations; :data:`UNION_TAGS` lists them so :func:`busbar.config.errors.key_path` can
drop them.

Source: docs/configuration.md#sections (unknown keys fail closed at every level),
docs/security.md#5-var-interpolation-structure-preserving (secret references are not interpolation),
docs/config-at-a-glance.md#providers (api_key).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from busbar.proto.base import Disposition

PROTOCOLS = ("anthropic", "openai", "gemini", "bedrock", "responses", "cohere")
AUTH_STYLES = ("bearer", "api-key", "jwt-bearer", "oauth-client-credentials")
DISPOSITION_CLASSES = Disposition.CLASSES
STRATEGIES = ("weighted", "cheapest", "fastest", "least_busy", "usage")
ON_ERROR_TERMINALS = ("nothing", "weighted", "first", "reject")
ADMIN_SCOPES = ("read-only", "hooks-register", "mint", "full")
WINDOWS = ("minute", "hour", "day", "month", "total")
BUILTIN_CHAIN_MODULE = "keys"
BUILTIN_ADMIN_MODULE = "admin-tokens"

#: Branch tags of every tagged union below; they appear in pydantic error locations only.
UNION_TAGS: set[str] = set()


class Strict(BaseModel):
    """Base of every config model: unknown keys are faults (typo fail-closed), values are not coerced
    (``weight: "2"`` is a fault, not 2).

    Each field is documented by the docstring right under it; ``busbar.config.schema_export`` reads them
    into the JSON Schema (not pydantic's ``use_attribute_docstrings``, which re-parses every class's
    source at import and would double the cost of every boot).
    """

    model_config = ConfigDict(extra="forbid", strict=True)


def tagged_union(branches: dict[str, Any], pick: Callable[[Any], str | None], *, error: str,
                 message: str) -> Any:
    """A union whose branch is chosen by ``pick(value)`` (a tag of ``branches`` or None).

    Args:
        branches: tag -> type, e.g. ``{"~strategy": str, "~ref": HookRef}``.
        pick: returns the tag for a raw value (dict, str, ...) or an already-built model; None means
            no branch fits, reported as ``error`` / ``message`` at the union's own location.
        error: the pydantic error type for "no branch fits" (``hook_entry``).
        message: the operator-facing text for it (``must be a strategy name or { module: ... }``).
    """
    UNION_TAGS.update(branches)
    members = tuple(Annotated[t, Tag(tag)] for tag, t in branches.items())
    return Annotated[Union[members], Discriminator(pick, custom_error_type=error,
                                                   custom_error_message=message)]


# ---------------------------------------------------------------- secret references


class EnvRef(Strict):
    """``{ env: VAR }``: the value of environment variable VAR, read once at boot (unset or empty: a
    boot error)."""

    env: str
    """Name of the environment variable holding the secret."""


class FileRef(Strict):
    """``{ file: /path }``: the file's contents (surrounding whitespace trimmed), read once at boot."""

    file: str
    """Path of the file holding the secret (PEM, token, ...)."""


class ModuleRef(Strict):
    """``{ module: <secret-plugin>, settings: {...} }``: resolved by a loaded kind: secret plugin."""

    module: str
    """Manifest name or alias of a kind: secret plugin (needs plugins.enabled: true)."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """The secret plugin's own opaque configuration."""


SECRET_HINT = ("must be a secret reference: { env: VAR }, { file: /path } or "
               "{ module: <secret-plugin>, settings: {...} }")


def _secret_kind(v: Any) -> str | None:
    if isinstance(v, EnvRef):
        return "~env"
    if isinstance(v, FileRef):
        return "~file"
    if isinstance(v, ModuleRef):
        return "~module"
    if isinstance(v, dict):
        for key in ("env", "file", "module"):
            if key in v:
                return "~" + key
    return None


if TYPE_CHECKING:  # what type checkers see; pydantic gets the tagged union below
    SecretRef = Union[EnvRef, FileRef, ModuleRef]
else:
    SecretRef = tagged_union({"~env": EnvRef, "~file": FileRef, "~module": ModuleRef}, _secret_kind,
                             error="secret_ref", message=SECRET_HINT)
    """A secret reference (never a literal secret): env, file or module."""
