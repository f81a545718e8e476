"""Check a store plugin's ``settings`` mapping: known keys, types, ranges, required keys, one line per fault.

One rule, two callers: the store plugin at open (:func:`check_settings`) and the kernel's config
validation before any plugin code is imported (:func:`schema_faults`, from the plugin's signed
manifest ``settings_schema``), so ``busbar --validate`` and the boot print the same lines.

``spec`` is ``{name: Setting | (type, default | REQUIRED)}`` or a :class:`SettingsSpec`;
:func:`settings_spec` derives one from a settings schema (JSON Schema 2020-12: top-level
``properties`` with ``type`` string / integer / number / boolean / array / object, ``default``,
``minimum``, ``maximum``, ``minLength``, ``x-busbar-url-schemes``; ``required``; ``additionalProperties: false`` refuses
unknown keys). A first-party store derives its spec from its own schema file
(:func:`package_spec`): one source of truth. The fault lines:

=============================  ===================================================================
fault                          line
=============================  ===================================================================
unknown key                    ``store.settings.<k>: unknown setting for the <backend> store (it
                               takes a, b)``
missing required key           ``store.settings.<k>: required by the <backend> store``
wrong type                     ``store.settings.<k>: expected an integer, got str`` (``a str``,
                               ``a bool``, ``a number``, ``a list``, ``a dict``)
a secret reference             ``store.settings.<k>: expected a str, got a { env: ... } secret
                               reference (store settings reach the plugin verbatim; write the value,
                               or interpolate it with ${VAR})``
out of range                   ``store.settings.<k>: must be between 1 and 100`` (``must be >= 0``,
                               ``must be <= 9``)
too short                      ``store.settings.<k>: must not be empty`` (``must be at least 3
                               characters``)
a URL of another scheme        ``store.settings.<k>: scheme mysql:// is not supported by the
                               <backend> store; use postgres:// or postgresql://`` (the property's
                               ``x-busbar-url-schemes`` list; a value with no ``://``: ``(none)``)
=============================  ===================================================================

``x-busbar-url-schemes`` (a Busbar keyword on a ``"type": "string"`` property, a list of schemes
without ``://``): the value is a URL whose scheme must be one of them, checked by ``--validate``
before the plugin is imported, as every other rule here.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from busbar_sdk.store.errors import StoreInvalid

__all__ = ["REQUIRED", "URL_SCHEMES_KEYWORD", "Setting", "SettingsSpec", "check_settings", "package_spec", "redact_url",
           "schema_faults", "settings_spec"]

REQUIRED = object()

_JSON_TYPES: Mapping[str, type | tuple[type, ...]] = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}
_SECRET_REFS = ({"env"}, {"file"})
#: The Busbar keyword listing a URL setting's schemes (see the module docstring).
URL_SCHEMES_KEYWORD = "x-busbar-url-schemes"


@dataclass(frozen=True)
class Setting:
    """One setting's rule.

    Attributes:
        type: the Python type(s) a value must have (``None``: any); a bool is never an int.
        default: filled in when the key is absent, or :data:`REQUIRED`.
        minimum, maximum: inclusive bounds of a number (``None``: unbounded).
        min_length: the least length of a string (``None``: any).
        schemes: the URL schemes a string may have (``None``: not a URL setting).
    """

    type: type | tuple[type, ...] | None
    default: Any = REQUIRED
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = None
    schemes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SettingsSpec:
    """A store's settings rules: ``settings`` in declaration order; ``closed``: unknown keys are faults."""

    settings: Mapping[str, Setting]
    closed: bool = True


Spec = SettingsSpec | Mapping[str, "Setting | tuple[type, Any]"]


def settings_spec(schema: str | Mapping[str, Any]) -> SettingsSpec:
    """The :class:`SettingsSpec` a settings schema (JSON text or parsed) declares; see the module docstring.

    A property whose ``type`` is absent or not one name of the table is not type-checked.

    Raises:
        ValueError: the schema is not a JSON object, or its ``properties`` not an object.
    """
    doc = json.loads(schema) if isinstance(schema, str) else schema
    if not isinstance(doc, Mapping) or not isinstance(doc.get("properties", {}), Mapping):
        raise ValueError("a settings schema must be a JSON Schema object whose properties is an object")
    listed = doc.get("required")
    required: list[Any] = listed if isinstance(listed, list) else []
    out: dict[str, Setting] = {}
    for name, prop in (doc.get("properties") or {}).items():
        prop = prop if isinstance(prop, Mapping) else {}
        typ = prop.get("type")
        out[name] = Setting(_JSON_TYPES.get(typ) if isinstance(typ, str) else None,
                            REQUIRED if name in required else prop.get("default"),
                            _number(prop.get("minimum")), _number(prop.get("maximum")),
                            prop.get("minLength") if type(prop.get("minLength")) is int else None,
                            _schemes(prop.get(URL_SCHEMES_KEYWORD)))
    return SettingsSpec(out, closed=doc.get("additionalProperties") is False)


def package_spec(package: str) -> SettingsSpec:
    """The :class:`SettingsSpec` of ``settings_schema.json`` shipped in ``package`` (a store plugin's own
    schema file, the one its signed manifest carries).

    Raises:
        FileNotFoundError: the package ships no ``settings_schema.json``.
        ValueError: as :func:`settings_spec`.
    """
    return settings_spec(resources.files(package).joinpath("settings_schema.json").read_text("utf-8"))


def schema_faults(settings: Mapping[str, Any], schema: str | Mapping[str, Any], backend: str) -> list[str]:
    """The fault lines of ``settings`` against a store manifest's settings ``schema`` (empty: fine);
    the very lines :func:`check_settings` raises for the same settings.

    Raises:
        ValueError: as :func:`settings_spec`.
    """
    return _judge(settings, settings_spec(schema), backend)[1]


def check_settings(settings: Mapping[str, Any], spec: Spec, backend: str) -> dict[str, Any]:
    """Validate ``settings`` against ``spec``; returns them with defaults filled in.

    Raises:
        StoreInvalid: unknown key, missing required key, wrong type or out of range (all faults,
            one per line; see the module docstring).
    """
    out, faults = _judge(settings, spec, backend)
    if faults:
        raise StoreInvalid("\n".join(faults))
    return out


def _judge(settings: Mapping[str, Any], spec: Spec, backend: str) -> tuple[dict[str, Any], list[str]]:
    rules = spec if isinstance(spec, SettingsSpec) else SettingsSpec(
        {k: v if isinstance(v, Setting) else Setting(v[0], v[1]) for k, v in spec.items()})
    faults: list[str] = []
    out: dict[str, Any] = {}
    if rules.closed:
        known = ", ".join(sorted(rules.settings))
        for name in sorted(set(settings) - set(rules.settings)):
            faults.append(f"store.settings.{name}: unknown setting for the {backend} store (it takes {known})")
    else:
        out.update({k: v for k, v in settings.items() if k not in rules.settings})
    for name, rule in rules.settings.items():
        if name not in settings:
            if rule.default is REQUIRED:
                faults.append(f"store.settings.{name}: required by the {backend} store")
            else:
                out[name] = rule.default
            continue
        value = settings[name]
        fault = _fault(value, rule, backend)
        if fault:
            faults.append(f"store.settings.{name}: {fault}")
        else:
            out[name] = value
    return out, faults


def _fault(value: Any, rule: Setting, backend: str) -> str:
    """What is wrong with one value (``""``: nothing)."""
    typ = rule.type
    if typ is not None and ((isinstance(value, bool) and typ is not bool) or not isinstance(value, typ)):
        got = type(value).__name__
        if isinstance(value, Mapping) and set(value) in _SECRET_REFS:
            got = (f"a {{ {next(iter(value))}: ... }} secret reference (store settings reach the plugin "
                   f"verbatim; write the value, or interpolate it with ${{VAR}})")
        return f"expected {_a(typ)}, got {got}"
    low, high = rule.minimum, rule.maximum
    if isinstance(value, (int, float)) and not isinstance(value, bool) and (
            (low is not None and value < low) or (high is not None and value > high)):
        if low is not None and high is not None:
            return f"must be between {low} and {high}"
        return f"must be >= {low}" if low is not None else f"must be <= {high}"
    if rule.min_length is not None and isinstance(value, str) and len(value) < rule.min_length:
        return "must not be empty" if rule.min_length == 1 else f"must be at least {rule.min_length} characters"
    if rule.schemes is not None and isinstance(value, str):
        scheme = urlsplit(value).scheme if "://" in value else ""
        if scheme.lower() not in rule.schemes:
            return (f"scheme {scheme + '://' if scheme else '(none)'} is not supported by the {backend} store; use "
                    + " or ".join(f"{s}://" for s in rule.schemes))
    return ""


def _schemes(v: Any) -> tuple[str, ...] | None:
    return tuple(x.lower() for x in v) if isinstance(v, list) and v and all(isinstance(x, str) for x in v) else None


def _a(typ: type | tuple[type, ...]) -> str:
    if typ is int:
        return "an integer"
    if isinstance(typ, tuple):
        return "a number"
    return f"a {typ.__name__}"


def _number(v: Any) -> int | float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs); unchanged without one."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
