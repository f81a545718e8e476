"""Config faults: collected with their key paths, reported once, one line each, never a traceback.

Tree::

    ConfigError            the config cannot boot; ``.faults`` is a list of one-line strings
    └── InterpolationError (busbar.config.interpolate) a ``${VAR}`` reference could not be expanded

A fault line reads ``<file>: <key path>: <what was found>; <what is allowed / the fix> (<default>)``,
e.g. ``config.yaml: pools.smart.members[1].weight: must be ≥ 1 (0 never selects the member; omit it
for 1)``. Warnings use the same shape and never stop a boot.

What lives here: :class:`ConfigError`, :class:`Findings` (the collector every validation module writes
to), :func:`key_path` and :func:`faults_from_validation` (pydantic errors -> fault lines). What must
not: the rules themselves (``busbar.config.validate*``).

Source: docs/configuration.md#startup-checks
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from busbar.config.schema_base import SECRET_HINT, UNION_TAGS
from busbar.faults import FaultList

#: Keys retired by an earlier release: unknown key -> what to write instead.
RENAMED_KEYS = {
    "window_s": "window_secs (the pre-1.0 alias is gone)",
    "n": "consecutive_n (the pre-1.0 alias is gone)",
    "deadline_secs": "timeout_secs (the alias is gone)",
    "cap": "max_hops (the alias is gone)",
    "otlp_endpoint": "otlp_url",
    "api_key_env": "api_key: { env: VAR }",
    "target": "model",
}

#: Required keys -> what to add, for a "required key is missing" fault.
_REQUIRED_HINTS = {
    "api_key": "add api_key: { env: VAR } (a secret reference)",
    "provider": "name an entry under providers:",
    "model": "name an entry under models:",
    "members": "add members: [ { model: <model> } ]",
    "providers": "add providers: (at least one provider with its api_key)",
    "models": "add models: (at least one model naming its provider)",
    "base_url": "add base_url: https://...",
    "buffer_seconds": "add buffer_seconds: 60 (seconds of observations to retain)",
    "cert": "add cert: { file: /path/fullchain.pem }",
    "key": "add key: { file: /path/privkey.pem }",
    "module": "name the plugin module",
    "fallback_pool": "name the pool to fall back to",
    "hook": "name the hook to fall back to",
}

_TYPE_WORDS = {
    "int_type": "must be a whole number", "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number", "float_type": "must be a number",
    "float_parsing": "must be a number", "bool_type": "must be true or false",
    "bool_parsing": "must be true or false", "string_type": "must be a string",
    "dict_type": "must be a map (key: value)", "model_type": "must be a map (key: value)",
    "model_attributes_type": "must be a map (key: value)", "list_type": "must be a list",
    "tuple_type": "must be a list",
}


class ConfigError(FaultList):
    """The merged config is invalid. ``faults``: one line per fault, file and key path first."""


@dataclass
class Findings:
    """Where validation writes: ``error(source, path, text)`` and ``warn(...)`` build fault lines."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def error(self, source: str, path: str, text: str) -> None:
        """Record a fatal fault ``<source>: <path>: <text>``."""
        self.errors.append(f"{source}: {path}: {text}" if path else f"{source}: {text}")

    def warn(self, source: str, path: str, text: str) -> None:
        """Record a non-fatal finding (logged at boot, printed by --validate)."""
        self.warnings.append(f"{source}: {path}: {text}" if path else f"{source}: {text}")


def key_path(loc: Iterable[Any]) -> str:
    """Render a pydantic location as a config key path: ``pools.smart.members[1].weight``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in UNION_TAGS or str(part).startswith(("function-", "union[", "literal[")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "a map" if isinstance(value, dict) else "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _members(tp: Any) -> list[Any]:
    """Flatten Annotated / Union / Optional into the member types."""
    import types
    from typing import Annotated, Union, get_args, get_origin

    origin = get_origin(tp)
    if origin is Annotated:
        return _members(get_args(tp)[0])
    if origin is Union or origin is types.UnionType:
        return [m for a in get_args(tp) for m in _members(a)]
    return [tp]


def _known_keys(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> list[str]:
    """The keys the model(s) at ``loc`` (the parent of an unknown key) accept, best effort."""
    from typing import get_args, get_origin

    nodes: list[Any] = [model] if model is not None else []
    for part in loc:
        if part in UNION_TAGS:
            continue
        nxt: list[Any] = []
        for n in (m for node in nodes for m in _members(node)):
            if isinstance(n, type) and issubclass(n, BaseModel):
                if isinstance(part, str) and part in n.model_fields:
                    nxt.append(n.model_fields[part].annotation)
                continue
            origin, args = get_origin(n), get_args(n)
            if origin in (list, tuple) and isinstance(part, int) and args:
                nxt.append(args[0])
            elif origin is dict and isinstance(part, str) and len(args) == 2:
                nxt.append(args[1])
        nodes = nxt
    keys: list[str] = []
    for n in (m for node in nodes for m in _members(node)):
        if isinstance(n, type) and issubclass(n, BaseModel):
            keys += [k for k in n.model_fields if k not in keys]
    return keys


def _unknown_key(name: str, loc: tuple[Any, ...], model: type[BaseModel] | None) -> str:
    if name in RENAMED_KEYS:
        return f"unknown key; write {RENAMED_KEYS[name]}"
    close = difflib.get_close_matches(name, _known_keys(model, loc[:-1]), n=1, cutoff=0.75)
    if close:
        return (f"unknown key (typo? did you mean {close[0]}?); remove it or check the spelling in "
                f"docs/config-at-a-glance.md")
    return "unknown key (typo?); remove it or check the spelling in docs/config-at-a-glance.md"


def _message(err: Any, loc: tuple[Any, ...], model: type[BaseModel] | None) -> str:
    etype = err.get("type", "")
    if etype == "extra_forbidden":
        return _unknown_key(str(loc[-1]), loc, model)
    if etype == "missing":
        hint = _REQUIRED_HINTS.get(str(loc[-1]) if loc else "")
        return f"required key is missing; {hint}" if hint else "required key is missing"
    if etype == "literal_error":
        allowed = err.get("ctx", {}).get("expected", "")
        return f"{_show(err.get('input'))} is not allowed; use {allowed}"
    if etype in _TYPE_WORDS:
        text = f"{_TYPE_WORDS[etype]}, found {_show(err.get('input'))}"
        if etype == "string_type" and isinstance(err.get("input"), (int, float, bool)):
            text += f' (quote it: "{err["input"]}")'
        return text
    if etype == "too_long" and isinstance(err.get("input"), dict):
        return "an entry names exactly one module; write one list entry per module"
    if etype == "too_short" and isinstance(err.get("input"), dict):
        return "an entry names exactly one module, found none"
    if etype == "secret_ref":
        if isinstance(err.get("input"), str):   # never echo it: it may be the secret itself
            return (f"{SECRET_HINT}, found a plain string; write {{ env: VAR }} in place of \"${{VAR}}\" or "
                    f"a literal key")
        return f"{SECRET_HINT}, found {_show(err.get('input'))}"
    msg = str(err.get("msg", "")).replace("Value error, ", "")
    if etype in ("hook_entry", "on_exhausted", "on_error", "auth_entry"):
        return f"{msg}, found {_show(err.get('input'))}"
    return msg


def faults_from_validation(exc: ValidationError, source: str, prefix: str = "",
                           model: type[BaseModel] | None = None) -> list[str]:
    """Turn a pydantic ``ValidationError`` into one fault line per distinct key path.

    Args:
        exc: the error raised by ``Model.model_validate``.
        source: the file label, ``config.yaml`` / ``providers.yaml``.
        prefix: a key path prepended to every location (a catalog entry's name).
        model: the model that was validated, for "did you mean" suggestions on unknown keys.

    Returns:
        ``["config.yaml: pools.smart.colour: unknown key (typo?); ..."]``, in pydantic's order.
    """
    by_path: dict[str, str] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        path = key_path(((prefix,) if prefix else ()) + loc)
        by_path.setdefault(path, f"{source}: {path or '(top level)'}: {_message(err, loc, model)}")
    return list(by_path.values())
