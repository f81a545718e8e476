"""A plugin instance's ``settings:`` against its plugin's signed manifest ``settings_schema``, whole.

The schema is JSON Schema 2020-12 (docs/plugin-format.md "Settings schema keywords"); the kernel
validates every configured hook and auth-module instance with it (``jsonschema``) before the plugin
is opened, so ``busbar --validate``, the boot and an admin ``PATCH /hooks/{name}/settings`` refuse
the same settings with the same lines, instead of the boot alone failing on the plugin's
``busbar_open`` (or, for a plugin that does not check a key, the key doing nothing). The Busbar
keywords (``x-busbar-*``) are judged elsewhere (``busbar.hooks.check``); for a hook, the top-level
``required`` keys too (``busbar.security.egress.settings_faults``, with the plugin's description).

One line per fault, naming the key path under ``settings`` (``where``) and what is wrong:

==============================  ==================================================================
JSON Schema keyword             text
==============================  ==================================================================
``additionalProperties: false`` ``unknown setting for <plugin> (it takes a, b, c)`` (one per key)
``type``                        ``expected an integer, got str`` (``a string``, ``a number``,
                                ``a boolean``, ``a list``, ``a map``)
``enum`` / ``const``            ``'bogus' is not one of decision, generative``
``minimum`` / ``maximum``       ``must be >= 1`` / ``must be <= 100`` (``exclusive*``: ``>`` ``<``)
``minItems`` / ``maxItems``     ``must list at least 2 item(s)`` / ``at most``
``minLength`` / ``maxLength``   ``must not be empty`` / ``must be at least 3 characters`` /
                                ``must be at most 64 characters``
``required`` (nested)           ``<parent>.<key>: required``
``pattern``                     ``must match the pattern ^a`` (``\\S``: ``must not be blank``)
``uniqueItems``                 ``must not list an item twice``
anything else                   ``does not satisfy the plugin's settings schema (<keyword>)``
==============================  ==================================================================

A schema that is not valid JSON Schema judges nothing here (its plugin checks its settings itself).
Values are never echoed except an ``enum``/``const`` miss (settings may hold credentials).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError

__all__ = ["schema_faults", "with_schema_faults"]

_TYPES = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "a boolean",
          "array": "a list", "object": "a map", "null": "null"}
_GOT = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "map", type(None): "null"}


def schema_faults(schema: str | Mapping[str, Any] | None, settings: Any, module: str, *,
                  root_required: bool = False) -> list[tuple[str, str]]:
    """``(key path under settings, text)`` for every way ``settings`` breaks ``schema`` (the
    manifest's JSON text or parsed object; ``None``: nothing to judge), in key-path order.

    Args:
        schema: the plugin's manifest ``settings_schema``.
        settings: the instance's ``settings:`` (``{}`` when absent).
        module: the plugin's name as the config spells it, for the unknown-key line.
        root_required: report the schema's top-level ``required`` keys too (``<key>: required``);
            a hook's are reported by ``busbar.security.egress.settings_faults`` instead.
    """
    if schema is None:
        return []
    text = schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)
    validator = _validator(text)
    if validator is None:
        return []
    out: list[tuple[str, str]] = []
    for err in validator.iter_errors(settings):
        out.extend(_lines(err, module, root_required))
    return sorted(out, key=lambda line: _order(line[0]))


def with_schema_faults(first: list[tuple[str, str]], schema: str | Mapping[str, Any] | None, settings: Any,
                       module: str, *, prefix: str, root_required: bool = False) -> list[tuple[str, str]]:
    """``first`` (the Busbar keywords' faults, at full key paths), then every :func:`schema_faults`
    line at ``<prefix>.<key path>`` (``prefix`` alone for the settings map itself) that ``first``
    does not already name: one fault per key path, the more specific line winning."""
    named = {where for where, _ in first}
    out = list(first)
    for where, text in schema_faults(schema, settings, module, root_required=root_required):
        at = f"{prefix}.{where}" if prefix and where else prefix or where
        if at not in named:
            out.append((at, text))
    return out


def _is_integer(_checker: Any, value: Any) -> bool:
    """An integer is an ``int`` (never a ``bool``, never a float such as ``2000.0``, which JSON
    Schema counts as one but the plugins, reading Python values, refuse)."""
    return isinstance(value, int) and not isinstance(value, bool)


#: Draft 2020-12 with the plugins' reading of "integer".
_Validator = validators.extend(  # type: ignore[no-untyped-call]  # jsonschema leaves extend untyped
    Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


@lru_cache(maxsize=64)
def _validator(text: str) -> Any:
    try:
        doc = json.loads(text)
        Draft202012Validator.check_schema(doc)
    except (ValueError, SchemaError):
        return None
    return _Validator(doc)


def _lines(err: ValidationError, module: str, root_required: bool) -> Iterable[tuple[str, str]]:
    where = _path(err.absolute_path)
    kind: Any = err.validator
    want: Any = err.validator_value
    value: Any = err.instance
    schema: Mapping[str, Any] = err.schema if isinstance(err.schema, Mapping) else {}
    if kind == "required":
        if not where and not root_required:     # a hook's: the "required by <plugin> (...)" line says it
            return []
        missing = [k for k in want if isinstance(value, Mapping) and k not in value]
        return [(_join(where, k), "required") for k in missing]
    if kind == "additionalProperties" and want is False and isinstance(value, Mapping):
        known = sorted(schema.get("properties") or {})
        extra = [k for k in value if k not in known and not _pattern_match(schema, k)]
        return [(_join(where, k), f"unknown setting for {module} (it takes {', '.join(known) or 'nothing'})")
                for k in extra]
    if kind == "type":
        names = want if isinstance(want, list) else [want]
        expected = " or ".join(_TYPES.get(n, str(n)) for n in names)
        return [(where, f"expected {expected}, got {_GOT.get(type(value), type(value).__name__)}")]
    if kind in ("enum", "const"):
        options = want if kind == "enum" else [want]
        return [(where, f"{value!r} is not one of {', '.join(str(o) for o in options)}")]
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if kind in bounds:
        return [(where, f"must be {bounds[kind]} {want}")]
    if kind in ("minItems", "maxItems"):
        return [(where, f"must list {'at least' if kind == 'minItems' else 'at most'} {want} item(s)")]
    if kind == "minLength":
        return [(where, "must not be empty" if want == 1 else f"must be at least {want} characters")]
    if kind == "maxLength":
        return [(where, f"must be at most {want} characters")]
    if kind == "pattern":
        return [(where, "must not be blank" if want == r"\S" else f"must match the pattern {want}")]
    if kind == "uniqueItems":
        return [(where, "must not list an item twice")]
    if kind == "dependentRequired":
        return [(where, err.message)]               # names keys only: "'b' is a dependency of 'a'"
    return [(where, f"does not satisfy the plugin's settings schema ({kind})")]


def _pattern_match(schema: Mapping[str, Any], key: str) -> bool:
    import re

    return any(re.search(p, key) for p in (schema.get("patternProperties") or {}))


def _path(parts: Sequence[str | int] | Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        out = f"{out}[{part}]" if isinstance(part, int) else _join(out, str(part))
    return out


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _order(where: str) -> list[Any]:
    """Key paths in document-ish order: ``a[2]`` before ``a[10]``."""
    out: list[Any] = []
    for chunk in where.replace("[", ".[").split("."):
        out.append((0, int(chunk[1:-1]), "") if chunk.startswith("[") and chunk[1:-1].isdigit() else (1, 0, chunk))
    return out
