"""Fault injection: scripted rules, their validation, and how a rule becomes an :class:`~.wire.Outcome`.

A script is an ordered list of rules ``{"match": {...}, "times": N, "response": {...}}`` (the JSON of
``POST /_mock/script`` and ``--script FILE``). Each protocol request takes the first rule whose match
fits; a rule serves ``times`` requests (default 1, -1 = forever) and is then removed, so rules with
the same match are consumed first in, first out.

``match`` keys (all optional, null = any): ``protocol`` (one of :data:`PROTOCOLS`), ``model`` (the
body's ``model``), ``path_prefix`` (the raw request path starts with it), ``stream`` (bool).

``response`` keys (all optional): ``status``, ``body`` (JSON value, or a string sent verbatim),
``headers``, ``delay_ms``, ``hang``, ``fixture``, ``sse``, ``chunk_delay_ms``, ``drop_after``,
``error_after``, ``error`` (payload or message of the in-band error), ``text`` (replaces the default
reply text), ``stall_after`` (headers and N frames / body bytes, then silence until the client
leaves), ``trickle_ms`` (the body or frames written one byte at a time), ``body_bytes`` (a generated
JSON body of exactly N bytes, never held whole), ``gzip`` (the body sent ``content-encoding: gzip``,
compressed on the fly). At most one of body / fixture / sse / text / body_bytes; at most one of
drop_after / error_after / stall_after. Semantics: docs/mock-provider.md; how a
response becomes bytes on the wire: ``scripted.py``.

Validation collects every fault with its key path and raises once (:class:`ScriptError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import fixtures as fx

__all__ = [
    "ABSENT",
    "PROTOCOLS",
    "Match",
    "ResponseSpec",
    "Rule",
    "Script",
    "ScriptError",
    "parse_rules",
]

PROTOCOLS = ("openai", "anthropic", "responses", "gemini", "bedrock", "cohere")
ABSENT: Any = object()  # ResponseSpec.body when the rule gives no body (null is a valid body)
_MATCH_KEYS = ("protocol", "model", "path_prefix", "stream")
_RESPONSE_KEYS = (
    "status",
    "body",
    "headers",
    "delay_ms",
    "hang",
    "fixture",
    "sse",
    "chunk_delay_ms",
    "drop_after",
    "error_after",
    "error",
    "text",
    "stall_after",
    "trickle_ms",
    "body_bytes",
    "gzip",
)
_MAX_BODY_BYTES = 1 << 34  # 16 GiB: body_bytes is generated piece by piece, never held
_MAX_DELAY_MS = 3_600_000


class ScriptError(ValueError):
    """An invalid script; ``faults`` lists one line per problem (key path, found, allowed)."""

    def __init__(self, faults: list[str]) -> None:
        super().__init__("; ".join(faults))
        self.faults = faults


@dataclass(slots=True)
class Match:
    """Which requests a rule applies to; None fields match anything."""

    protocol: str | None = None
    model: str | None = None
    path_prefix: str | None = None
    stream: bool | None = None

    def fits(self, protocol: str | None, model: Any, path: str, stream: bool) -> bool:
        """True when every set field equals the request's value."""
        return (
            (self.protocol is None or self.protocol == protocol)
            and (self.model is None or self.model == model)
            and (self.path_prefix is None or path.startswith(self.path_prefix))
            and (self.stream is None or self.stream == stream)
        )


@dataclass(slots=True)
class ResponseSpec:
    """A validated ``response`` object; absent keys are None (``body`` uses a private sentinel)."""

    status: int | None = None
    body: Any = ABSENT
    headers: dict[str, str] = field(default_factory=dict)
    delay_ms: float | None = None
    hang: bool = False
    fixture: str | None = None
    sse: list[Any] | str | None = None
    chunk_delay_ms: float | None = None
    drop_after: int | None = None
    error_after: int | None = None
    error: Any = None
    text: str | None = None
    stall_after: int | None = None
    trickle_ms: float | None = None
    body_bytes: int | None = None
    gzip: bool = False


@dataclass(slots=True)
class Rule:
    """One script rule: match, remaining uses (-1 = forever), response, and its source JSON."""

    match: Match
    times: int
    response: ResponseSpec
    source: dict[str, Any]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _parse_response(raw: Any, at: str, faults: list[str], store: fx.FixtureStore) -> ResponseSpec:
    spec = ResponseSpec()
    if not isinstance(raw, dict):
        faults.append(f"{at}: expected an object, found {type(raw).__name__}")
        return spec
    for key in raw:
        if key not in _RESPONSE_KEYS:
            faults.append(f"{at}.{key}: unknown key; allowed: {', '.join(_RESPONSE_KEYS)}")
    if "status" in raw:
        if _is_int(raw["status"]) and 100 <= raw["status"] <= 599:
            spec.status = raw["status"]
        else:
            faults.append(f"{at}.status: {raw['status']!r} is not an HTTP status (an int 100-599)")
    if "body" in raw:
        spec.body = raw["body"]
    headers = raw.get("headers", {})
    if isinstance(headers, dict) and all(isinstance(v, (str, int, float)) for v in headers.values()):
        spec.headers = {str(k).lower(): str(v) for k, v in headers.items()}
    else:
        faults.append(f"{at}.headers: expected an object of header name -> string or number")
    for key in ("delay_ms", "chunk_delay_ms", "trickle_ms"):
        if key in raw:
            v = raw[key]
            if _is_num(v) and 0 <= v <= _MAX_DELAY_MS:
                setattr(spec, key, float(v))
            else:
                faults.append(f"{at}.{key}: {v!r} is not a number of milliseconds in 0..{_MAX_DELAY_MS}")
    for key in ("drop_after", "error_after", "stall_after"):
        if key in raw:
            v = raw[key]
            if _is_int(v) and v >= 0:
                setattr(spec, key, v)
            else:
                faults.append(f"{at}.{key}: {v!r} is not a count (an int >= 0)")
    for key in ("hang", "gzip"):
        if key in raw:
            if isinstance(raw[key], bool):
                setattr(spec, key, raw[key])
            else:
                faults.append(f"{at}.{key}: {raw[key]!r} is not a boolean")
    if "body_bytes" in raw:
        v = raw["body_bytes"]
        if _is_int(v) and 16 <= v <= _MAX_BODY_BYTES:
            spec.body_bytes = v
        else:
            faults.append(f"{at}.body_bytes: {v!r} is not a byte count in 16..{_MAX_BODY_BYTES}")
    if "fixture" in raw:
        rel = raw["fixture"]
        if not isinstance(rel, str):
            faults.append(f"{at}.fixture: {rel!r} is not a path string")
        else:
            try:
                store.resolve(rel)
                spec.fixture = rel
            except fx.FixtureError as exc:
                faults.append(f"{at}.fixture: {exc}; give a path relative to the fixtures dir")
    if "sse" in raw:
        if isinstance(raw["sse"], (list, str)):
            spec.sse = raw["sse"]
            for j, item in enumerate(raw["sse"] if isinstance(raw["sse"], list) else ()):
                if (
                    isinstance(item, dict)
                    and "raw" in item
                    and (set(item) != {"raw"} or not isinstance(item["raw"], str))
                ):
                    faults.append(f'{at}.sse[{j}]: a raw item is exactly {{"raw": "<text>"}}')
        else:
            faults.append(f"{at}.sse: expected a list of data payloads or a string of raw SSE text")
    if "error" in raw:
        if isinstance(raw["error"], (dict, str)):
            spec.error = raw["error"]
        else:
            faults.append(f"{at}.error: expected an object (event payload) or a string (message)")
    if "text" in raw:
        if isinstance(raw["text"], str):
            spec.text = raw["text"]
        else:
            faults.append(f"{at}.text: {raw['text']!r} is not a string")
    for group in (("body", "fixture", "sse", "text", "body_bytes"), ("drop_after", "error_after", "stall_after")):
        given = [k for k in group if k in raw]
        if len(given) > 1:
            faults.append(f"{at}: {' and '.join(given)} are exclusive; keep one")
    return spec


def parse_rules(doc: Any, store: fx.FixtureStore) -> list[Rule]:
    """Validate a script document ``{"rules": [...]}`` and return its rules.

    Raises:
        ScriptError: one fault per problem, e.g. ``rules[0].times: 0 is not a positive count or -1``.
    """
    faults: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise ScriptError(['script: expected {"rules": [...]}'])
    for key in doc:
        if key != "rules":
            faults.append(f"script.{key}: unknown key; allowed: rules")
    rules: list[Rule] = []
    for i, raw in enumerate(doc["rules"]):
        at = f"rules[{i}]"
        if not isinstance(raw, dict):
            faults.append(f"{at}: expected an object, found {type(raw).__name__}")
            continue
        for key in raw:
            if key not in ("match", "times", "response"):
                faults.append(f"{at}.{key}: unknown key; allowed: match, times, response")
        match = Match()
        m = raw.get("match") or {}
        if not isinstance(m, dict):
            faults.append(f"{at}.match: expected an object")
            m = {}
        for key in m:
            if key not in _MATCH_KEYS:
                faults.append(f"{at}.match.{key}: unknown key; allowed: {', '.join(_MATCH_KEYS)}")
        if m.get("protocol") is not None and m["protocol"] not in PROTOCOLS:
            faults.append(
                f"{at}.match.protocol: {m['protocol']!r} is not one of {', '.join(PROTOCOLS)} or null"
            )
        for key in ("model", "path_prefix"):
            if m.get(key) is not None and not isinstance(m[key], str):
                faults.append(f"{at}.match.{key}: {m[key]!r} is not a string or null")
        if m.get("stream") is not None and not isinstance(m["stream"], bool):
            faults.append(f"{at}.match.stream: {m['stream']!r} is not a boolean or null")
        match = Match(m.get("protocol"), m.get("model"), m.get("path_prefix"), m.get("stream"))
        times = raw.get("times", 1)
        if not _is_int(times) or (times < 1 and times != -1):
            faults.append(f"{at}.times: {times!r} is not a positive count or -1 (forever); default 1")
        if "response" not in raw:
            faults.append(f"{at}.response: missing; give at least {{}} (the default reply)")
        spec = _parse_response(raw.get("response", {}), f"{at}.response", faults, store)
        rules.append(Rule(match, times if _is_int(times) else 1, spec, raw))
    if faults:
        raise ScriptError(faults)
    return rules


class Script:
    """The live rule list (FIFO per match)."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []

    def add(self, rules: list[Rule]) -> None:
        """Append rules after the existing ones."""
        self.rules.extend(rules)

    def clear(self) -> int:
        """Drop every rule; return how many there were."""
        n = len(self.rules)
        self.rules.clear()
        return n

    def take(self, protocol: str | None, model: Any, path: str, stream: bool) -> ResponseSpec | None:
        """Consume one use of the first fitting rule and return its response, or None."""
        for i, rule in enumerate(self.rules):
            if rule.match.fits(protocol, model, path, stream):
                if rule.times > 0:
                    rule.times -= 1
                    if rule.times == 0:
                        del self.rules[i]
                return rule.response
        return None

    def snapshot(self) -> list[dict[str, Any]]:
        """The pending rules as JSON, each with its remaining ``times``."""
        return [{**r.source, "times": r.times} for r in self.rules]
