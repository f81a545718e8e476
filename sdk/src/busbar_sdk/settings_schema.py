"""What the kernel must check about a plugin's ``settings:``, declared in its manifest's settings schema.

A plugin's ``settings_schema`` (JSON Schema 2020-12, signed in its manifest) may mark top-level
properties with two Busbar extension keywords; config validation (``busbar --validate`` and boot)
then judges every configured instance of *any* plugin that way, with no plugin named in the kernel:

==========================  ======================================================================
keyword (value ``true``)    meaning
==========================  ======================================================================
``x-busbar-egress-url``     on a ``"type": "string"`` property: the value is a URL this plugin
                            connects to; the kernel refuses it unless the SSRF guard passes it as a
                            hook-sidecar endpoint (loopback, ``http://`` ok; RFC 1918 / CGNAT /
                            link-local / cloud metadata refused; any other host ``https://``)
``x-busbar-egress-allow``   on a ``"type": "array"`` property (at most one): this instance's own
                            exceptions to the guard (hosts, IPs or CIDRs), applied to this
                            instance's egress URLs and to nothing else
``x-busbar-pool-member``    on a ``"type": "string"`` schema at any depth (under ``properties`` or
                            ``items``): the value names a member of the pool the instance sits on,
                            by model name or tag; the kernel refuses any other name (a ref in
                            ``global_hooks`` has no pool: not checked). :func:`member_names` walks
                            the settings for them.
``x-busbar-within-timeout`` on a top-level ``"type": "integer"`` property (milliseconds): the
                            gate's ``timeout_ms`` must be at least this value (its ``default`` when
                            the setting is absent): a plugin's own time budget for one decision
                            must fit in the deadline the kernel gives it. :func:`deadline_settings`.
``x-busbar-gateway-pool``   on a top-level ``"type": "string"`` property (at most one): the plugin
                            sends requests of its own back into this gateway through the pool it
                            names; the kernel refuses a name that is not a configured pool, the
                            pool the instance sits on, and any such setting on a ``global_hooks``
                            ref (its own requests would fire it again). :func:`gateway_refs`.
``x-busbar-gateway-model``  on a ``"type": "string"`` schema at any depth: a model the plugin's own
                            requests name; the kernel refuses one that is not a member model of the
                            pool the ``x-busbar-gateway-pool`` setting names.
``x-busbar-headers``        on a ``"type": "array"`` schema of strings at any depth: the request
                            headers this instance may read. The kernel projects
                            ``request.headers`` (``{lower-cased name: value}``) with the union of
                            every such list, and refuses a credential header
                            (:data:`CREDENTIAL_HEADERS`) or a name that is not an HTTP token at
                            boot. :func:`header_names`, :func:`header_faults`.
``x-busbar-cel``            on a ``"type": "string"`` schema at any depth: the value is a CEL
                            expression over ``req`` (docs/router.md#the-req-object); the kernel
                            compiles it with :func:`busbar_sdk.rules.compile_expr`, the plugin's
                            own compiler, and refuses one that does not compile with CEL's message.
                            :func:`cel_texts`, :func:`cel_faults`. A
                            header such an expression reads (``req.headers['x-tier']``) must be
                            listed in the schema's top-level ``x-busbar-headers`` setting.
``x-busbar-status-metrics`` at the schema's top level (value ``true``): the kernel exports the
                            counters, gauges and quantiles this plugin reports in its ``status``
                            reply on ``/metrics`` as ``busbar_<name>{hook, <labels>}`` (read at
                            scrape time). :func:`exports_status_metrics`.
==========================  ======================================================================

A property named in the schema's top-level ``required`` must be present in ``settings:``.

Example (the first-party ``busbar-webrequest-hook``)::

    {"type": "object", "required": ["url"], "properties": {
        "url": {"type": "string", "x-busbar-egress-url": true},
        "allow_hosts": {"type": "array", "items": {"type": "string"}, "x-busbar-egress-allow": true}}}

See docs/plugin-format.md "Settings schema keywords".
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CEL_KEYWORD", "CREDENTIAL_HEADERS", "EGRESS_ALLOW_KEYWORD", "EGRESS_URL_KEYWORD", "GATEWAY_MODEL_KEYWORD",
           "GATEWAY_POOL_KEYWORD", "HEADERS_KEYWORD", "NO_RULES", "GatewayRefs", "POOL_MEMBER_KEYWORD",
           "SettingsRules", "STATUS_METRICS_KEYWORD", "WITHIN_TIMEOUT_KEYWORD", "cel_faults", "cel_texts",
           "deadline_settings", "exports_status_metrics", "gateway_refs", "header_faults", "header_names",
           "is_credential_header", "member_names", "settings_rules"]

EGRESS_URL_KEYWORD = "x-busbar-egress-url"
EGRESS_ALLOW_KEYWORD = "x-busbar-egress-allow"
POOL_MEMBER_KEYWORD = "x-busbar-pool-member"
WITHIN_TIMEOUT_KEYWORD = "x-busbar-within-timeout"
STATUS_METRICS_KEYWORD = "x-busbar-status-metrics"
GATEWAY_POOL_KEYWORD = "x-busbar-gateway-pool"
GATEWAY_MODEL_KEYWORD = "x-busbar-gateway-model"
HEADERS_KEYWORD = "x-busbar-headers"
CEL_KEYWORD = "x-busbar-cel"

#: Request headers that carry a credential (the caller's key, a session, a signature): never
#: projected to a hook, whatever its settings list; so is every ``x-amz-*`` header (SigV4).
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key",
                                "cookie", "set-cookie"})
_CREDENTIAL_PREFIXES = ("x-amz-",)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


@dataclass(frozen=True)
class SettingsRules:
    """The kernel-checked part of one plugin's settings schema.

    Attributes:
        required: top-level keys ``settings:`` must carry, in schema order.
        egress_urls: top-level keys whose value is an egress URL (SSRF-guarded), in schema order.
        egress_allow: the key holding this instance's own allow-list, or ``None``.
        descriptions: key -> the property's ``description`` (``""`` when absent), for fault lines.
    """

    required: tuple[str, ...] = ()
    egress_urls: tuple[str, ...] = ()
    egress_allow: str | None = None
    descriptions: Mapping[str, str] | None = None

    def describe(self, key: str) -> str:
        """The first sentence of ``key``'s description (``""`` when it has none)."""
        text = (self.descriptions or {}).get(key, "")
        return text.split(". ", 1)[0].rstrip(".")


#: The rules of a plugin without a settings schema: nothing to check.
NO_RULES = SettingsRules()


def settings_rules(schema: str | Mapping[str, Any] | None) -> SettingsRules:
    """Read the kernel-checked rules out of a settings schema (a JSON string, a parsed object or None).

    Raises:
        ValueError: the schema is not a JSON object, or a Busbar keyword is misused (a value other
            than ``true``, ``x-busbar-egress-url`` on a property that is not ``"type": "string"``,
            ``x-busbar-egress-allow`` on one that is not ``"type": "array"``, or on two properties).
    """
    if schema is None:
        return NO_RULES
    doc = json.loads(schema) if isinstance(schema, str) else schema
    if not isinstance(doc, Mapping):
        raise ValueError("must be a JSON Schema object")
    props = doc.get("properties") or {}
    required = doc.get("required") or []
    if not isinstance(props, Mapping) or not isinstance(required, list):
        raise ValueError("properties must be an object and required a list")
    urls: list[str] = []
    allow: str | None = None
    descriptions: dict[str, str] = {}
    for key, prop in props.items():
        if not isinstance(prop, Mapping):
            continue
        desc = prop.get("description")
        descriptions[key] = desc if isinstance(desc, str) else ""
        for keyword, want in ((EGRESS_URL_KEYWORD, "string"), (EGRESS_ALLOW_KEYWORD, "array"),
                              (GATEWAY_POOL_KEYWORD, "string")):
            if keyword not in prop:
                continue
            if prop[keyword] is not True:
                raise ValueError(f"properties.{key}.{keyword} must be true")
            if prop.get("type") != want:
                raise ValueError(f"properties.{key}: {keyword} needs \"type\": \"{want}\"")
        if prop.get(EGRESS_URL_KEYWORD) is True:
            urls.append(key)
        if prop.get(EGRESS_ALLOW_KEYWORD) is True:
            if allow is not None:
                raise ValueError(f"{EGRESS_ALLOW_KEYWORD} is on both {allow} and {key}; one allow-list per plugin")
            allow = key
    pools = [k for k, p in props.items() if isinstance(p, Mapping) and p.get(GATEWAY_POOL_KEYWORD) is True]
    if len(pools) > 1:
        raise ValueError(f"{GATEWAY_POOL_KEYWORD} is on both {pools[0]} and {pools[1]}; one gateway pool per plugin")
    return SettingsRules(tuple(str(r) for r in required if isinstance(r, str)), tuple(urls), allow, descriptions)


def member_names(schema: str | Mapping[str, Any] | None, settings: Any) -> list[tuple[str, str]]:
    """Every string of ``settings`` that ``schema`` marks ``x-busbar-pool-member``, as
    ``(key path under settings, value)`` in document order, e.g. ``("rules[1].to[0]", "gpt-4o")``.

    The walk follows ``properties`` into objects and ``items`` into arrays; values of another type
    than the schema says are skipped (the plugin's own validation reports them).
    """
    return _marked_strings(schema, settings, POOL_MEMBER_KEYWORD)


def cel_texts(schema: str | Mapping[str, Any] | None, settings: Any) -> list[tuple[str, str]]:
    """Every string of ``settings`` that ``schema`` marks ``x-busbar-cel`` (a CEL expression), as
    ``(key path under settings, text)`` in document order, e.g. ``("fallback[0].rules[2].when", "req.stream")``.

    Walks as :func:`member_names` does; values of another type are skipped (the plugin reports them).
    """
    return _marked_strings(schema, settings, CEL_KEYWORD)


def _marked_strings(schema: str | Mapping[str, Any] | None, settings: Any, keyword: str) -> list[tuple[str, str]]:
    """``(key path, value)`` of every string value whose schema carries ``keyword: true``."""
    if schema is None:
        return []
    node = json.loads(schema) if isinstance(schema, str) else schema
    found: list[tuple[str, Any]] = []
    _walk_marked(node, settings, "", keyword, found)
    return [(path, value) for path, value in found if isinstance(value, str)]


@dataclass(frozen=True)
class GatewayRefs:
    """What a plugin's own requests back into the gateway name (see :func:`gateway_refs`).

    Attributes:
        pool_key: the top-level key marked ``x-busbar-gateway-pool``, or ``None``.
        pool: that setting's value when it is a string, else ``None`` (absent or another type).
        models: every ``x-busbar-gateway-model`` string as ``(key path under settings, value)``.
    """

    pool_key: str | None = None
    pool: str | None = None
    models: tuple[tuple[str, str], ...] = ()


def gateway_refs(schema: str | Mapping[str, Any] | None, settings: Any) -> GatewayRefs:
    """The gateway pool and models an instance's ``settings`` name, by its schema's
    ``x-busbar-gateway-pool`` / ``x-busbar-gateway-model`` keywords (empty without them)."""
    if schema is None:
        return GatewayRefs()
    node = json.loads(schema) if isinstance(schema, str) else schema
    props = node.get("properties") if isinstance(node, Mapping) else None
    key = next((k for k, p in (props or {}).items()
                if isinstance(p, Mapping) and p.get(GATEWAY_POOL_KEYWORD) is True), None)
    value = settings.get(key) if key is not None and isinstance(settings, Mapping) else None
    found: list[tuple[str, Any]] = []
    _walk_marked(node, settings, "", GATEWAY_MODEL_KEYWORD, found)
    models = tuple((path, v) for path, v in found if isinstance(v, str))
    return GatewayRefs(key, value if isinstance(value, str) else None, models)


def deadline_settings(schema: str | Mapping[str, Any] | None, settings: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(key, milliseconds)`` of every top-level ``x-busbar-within-timeout`` setting: the configured
    value, else the schema's ``default``; values that are not integers are skipped."""
    if schema is None:
        return []
    node = json.loads(schema) if isinstance(schema, str) else schema
    props = node.get("properties") if isinstance(node, Mapping) else None
    out: list[tuple[str, int]] = []
    for key, sub in (props or {}).items():
        if isinstance(sub, Mapping) and sub.get(WITHIN_TIMEOUT_KEYWORD) is True:
            v = settings.get(key, sub.get("default"))
            if type(v) is int:
                out.append((key, v))
    return out


def exports_status_metrics(schema: str | Mapping[str, Any] | None) -> bool:
    """Does the schema declare ``x-busbar-status-metrics: true`` at its top level?"""
    if schema is None:
        return False
    node = json.loads(schema) if isinstance(schema, str) else schema
    return isinstance(node, Mapping) and node.get(STATUS_METRICS_KEYWORD) is True


def _walk_marked(node: Any, value: Any, path: str, keyword: str, out: list[tuple[str, Any]]) -> None:
    """Append ``(key path, value)`` for every value of ``value`` whose schema ``node`` carries
    ``keyword: true`` (following ``properties`` into objects and ``items`` into arrays)."""
    if not isinstance(node, Mapping):
        return
    if node.get(keyword) is True:
        out.append((path, value))
        return
    props = node.get("properties")
    if isinstance(props, Mapping) and isinstance(value, Mapping):
        for key, sub in props.items():
            if key in value:
                _walk_marked(sub, value[key], f"{path}.{key}" if path else key, keyword, out)
    items = node.get("items")
    if isinstance(items, Mapping) and isinstance(value, list):
        for i, item in enumerate(value):
            _walk_marked(items, item, f"{path}[{i}]", keyword, out)


def _header_lists(schema: str | Mapping[str, Any] | None, settings: Any) -> list[tuple[str, Any]]:
    if schema is None:
        return []
    node = json.loads(schema) if isinstance(schema, str) else schema
    out: list[tuple[str, Any]] = []
    _walk_marked(node, settings, "", HEADERS_KEYWORD, out)
    return out


def is_credential_header(name: str) -> bool:
    """Is ``name`` (any case) a header that carries a credential (:data:`CREDENTIAL_HEADERS`, ``x-amz-*``)?"""
    low = name.lower()
    return low in CREDENTIAL_HEADERS or low.startswith(_CREDENTIAL_PREFIXES)


def header_faults(schema: str | Mapping[str, Any] | None, settings: Any) -> list[tuple[str, str]]:
    """``(key path under settings, text)`` for every entry of an ``x-busbar-headers`` list that
    cannot be projected: not a list of strings, a name that is not an HTTP header token, or a
    credential header (:func:`is_credential_header`). Empty when every list is fine."""
    out: list[tuple[str, str]] = []
    for path, value in _header_lists(schema, settings):
        if not isinstance(value, list):
            out.append((path, f"must be a list of request header names, found {type(value).__name__}"))
            continue
        for i, name in enumerate(value):
            where = f"{path}[{i}]"
            if not isinstance(name, str) or not _TOKEN.match(name):
                out.append((where, f"{name!r} is not a request header name (letters, digits and !#$%&'*+.^_`|~-)"))
            elif is_credential_header(name):
                out.append((where, f"'{name}' carries a credential; credentials are never projected to a hook "
                                   f"(authorization, proxy-authorization, x-api-key, x-goog-api-key, api-key, "
                                   f"cookie, set-cookie, x-amz-*): remove it"))
    return out


def cel_faults(schema: str | Mapping[str, Any] | None, settings: Any) -> list[tuple[str, str]]:
    """``(key path under settings, text)`` for every :func:`cel_texts` expression that does not
    compile, or reads a request header the schema's top-level ``x-busbar-headers`` setting does not
    list (every header, when the schema has none), the text being the plugin's own line after its
    key path (``CEL: INVALID_ARGUMENT: ...`` from :func:`busbar_sdk.rules.compile_expr`; ``reads
    header 'x-tier', which settings.headers does not list (...)`` from
    :func:`busbar_sdk.rules.header_fault`). Empty when every one is fine, or when the CEL library is
    not installed (a plugin that needs it is refused by its ``requires_dist`` then)."""
    import importlib.util

    texts = cel_texts(schema, settings)
    if not texts or importlib.util.find_spec("cel_expr_python") is None:
        return []
    from busbar_sdk.rules import RulesError, compile_expr, header_fault

    key, allowed = _cel_headers(schema, settings)
    out: list[tuple[str, str]] = []
    for where, text in texts:
        try:
            compile_expr(text, where)
        except RulesError as e:
            out.append((where, str(e).removeprefix(f"{where}: ")))
            continue
        fault = header_fault(text, allowed, f"settings.{key}")
        if fault:
            out.append((where, fault))
    return out


def _cel_headers(schema: str | Mapping[str, Any] | None, settings: Any) -> tuple[str, tuple[str, ...]]:
    """The top-level ``x-busbar-headers`` key (``"headers"`` when there is none) and the lower-cased
    header names it lists in ``settings``: what CEL settings may read as ``req.headers``."""
    node = json.loads(schema) if isinstance(schema, str) else schema
    props = node.get("properties") if isinstance(node, Mapping) else None
    key = next((k for k, p in (props or {}).items() if isinstance(p, Mapping) and p.get(HEADERS_KEYWORD) is True),
               None)
    value = settings.get(key) if key is not None and isinstance(settings, Mapping) else None
    names = value if isinstance(value, list) else []
    return key or "headers", tuple(dict.fromkeys(n.strip().lower() for n in names if isinstance(n, str)))


def header_names(schema: str | Mapping[str, Any] | None, settings: Any) -> tuple[str, ...]:
    """The request headers an instance may read: the union of its ``x-busbar-headers`` lists,
    lower-cased, in first-seen order, credentials and non-names left out (the kernel refuses
    them at boot: :func:`header_faults`). Empty: the projection carries no ``headers``."""
    out: dict[str, None] = {}
    for _, value in _header_lists(schema, settings):
        if isinstance(value, list):
            for name in value:
                if isinstance(name, str) and _TOKEN.match(name) and not is_credential_header(name):
                    out[name.lower()] = None
    return tuple(out)
