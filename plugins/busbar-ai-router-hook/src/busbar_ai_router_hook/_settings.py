"""Settings of one AI router instance, validated as desired state: every fault names its setting.

``parse(raw) -> Settings`` raises :class:`SettingsError` (``settings.candidates[2].name: ...``,
``settings.when: CEL: ...``, ``settings.state.redact[0]: ...``, ``settings.fallback[1].rules[0].when:
CEL: ...``). What the kernel checks at boot from the settings schema (every name is a member of the
pool; ``timeout`` within the gate's ``timeout_ms``; the generative engine's ``pool`` is another
configured pool, not on a ``global_hooks`` ref, and ``model``/``fallback_models`` are its member
models) is not repeated here.

``engine: generative`` adds ``gateway_url`` (the gateway's own data listener: a loopback
``http(s)://`` URL), ``gateway_key`` (optional ``{env: NAME}`` or ``{file: PATH}``, resolved here,
at configure), ``pool``, ``model``, ``fallback_models`` and ``retry: {attempts, backoff, max}``
(milliseconds); it refuses ``temperature`` and ``min_margin`` (one self-reported confidence: no
softmax, no runner-up), and ``engine: decision`` refuses the generative keys.
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from busbar_sdk.rules import RulesError, RuleSet, check_headers, compile_expr, fields_of, header_fault, names_of
from busbar_sdk.settings_schema import header_faults

__all__ = ["Candidate", "Generative", "Settings", "SettingsError", "parse"]

ENGINES = ("decision", "generative")
_GENERATIVE = ("gateway_url", "gateway_key", "pool", "model", "fallback_models", "retry")
_DECISION_ONLY = ("temperature", "min_margin")
_TOP = ("engine", "instructions", "candidates", "multi", "min_confidence", "min_margin", "temperature",
        "on_low_confidence", "fallback_on_low_confidence", "state", "when", "cache", "budget", "timeout",
        "fallback", "headers", *_GENERATIVE)


class SettingsError(ValueError):
    """One line naming the offending ``settings.<key>``."""


@dataclass(frozen=True)
class Candidate:
    """A candidate: the member ``name`` (model or tag), its ``description`` and ``examples``."""

    name: str
    description: str
    examples: tuple[str, ...]


@dataclass(frozen=True)
class Generative:
    """The generative engine's call: ``url`` (the gateway's Chat Completions endpoint), ``key`` (its
    bearer key or ``None``), ``pool``, ``models`` (``model`` then ``fallback_models``), and the
    per-model retry (``attempts``; ``backoff_ms`` doubling per attempt up to ``max_backoff_ms``)."""

    url: str
    key: str | None
    pool: str
    models: tuple[str, ...]
    attempts: int
    backoff_ms: int
    max_backoff_ms: int


@dataclass(frozen=True)
class Settings:
    """A validated configuration (units: ``timeout_ms`` milliseconds, ``cache_ttl_s`` seconds)."""

    engine: str
    instructions: str
    candidates: tuple[Candidate, ...]
    multi: bool
    min_confidence: float
    min_margin: float
    temperature: float
    on_low_confidence: tuple[str, ...]
    fallback_on_low_confidence: bool
    max_bytes: int
    headers: tuple[str, ...]
    redact: tuple[Any, ...]
    redact_src: tuple[str, ...]
    when: Any
    cache_size: int
    cache_ttl_s: float
    cache_key: Any
    max_calls_per_minute: int | None
    max_tokens_per_hour: int | None
    timeout_ms: int
    fallback: tuple[RuleSet, ...]
    req_fields: frozenset[str]
    generative: Generative | None = None


def _num(raw: dict[str, Any], key: str, default: float, lo: float, hi: float, where: str) -> float:
    v = raw.get(key, default)
    if type(v) not in (int, float) or not lo <= v <= hi:
        raise SettingsError(f"{where}.{key}: must be a number in {lo:g}..{hi:g}, found {v!r}")
    return float(v)


#: The largest budget cap (2**53): the fleet's counters are 64-bit integers in every store, and a
#: cap near 2**63 would overflow the sum a shared-store admission compares against it.
BUDGET_MAX = 2**53
def _int(raw: dict[str, Any], key: str, default: int | None, lo: int, where: str,
         hi: int | None = None) -> int | None:
    v = raw.get(key, default)
    if v is None:
        return None
    if type(v) is not int or v < lo:
        raise SettingsError(f"{where}.{key}: must be an integer >= {lo}, found {v!r}")
    if hi is not None and v > hi:
        raise SettingsError(f"{where}.{key}: must be at most {hi}, found {v!r}")
    return v


def _map(raw: dict[str, Any], key: str, known: tuple[str, ...]) -> dict[str, Any]:
    v = raw.get(key, {})
    if not isinstance(v, dict):
        raise SettingsError(f"settings.{key}: must be a map, found {type(v).__name__}")
    extra = sorted(set(v) - set(known))
    if extra:
        raise SettingsError(f"settings.{key}.{extra[0]}: not a {key} setting (known: {', '.join(known)})")
    return v


def parse(raw: Any) -> Settings:
    """Validate ``raw`` (see the module docstring)."""
    if not isinstance(raw, dict):
        raise SettingsError(f"settings: must be a map, found {type(raw).__name__}")
    extra = sorted(set(raw) - set(_TOP))
    if extra:
        raise SettingsError(f"settings.{extra[0]}: not an AI router setting (known: {', '.join(sorted(_TOP))})")
    engine = raw.get("engine", "decision")
    if engine not in ENGINES:
        raise SettingsError(f"settings.engine: '{engine}' is not an engine (decision, generative)")
    wrong = [k for k in (_DECISION_ONLY if engine == "generative" else _GENERATIVE) if k in raw]
    if wrong:
        why = ("the generative engine reports one confidence (no softmax, no runner-up)" if engine == "generative"
               else "it configures engine: generative")
        raise SettingsError(f"settings.{wrong[0]}: not a setting of engine: {engine} ({why})")
    generative = _generative(raw) if engine == "generative" else None
    cands = raw.get("candidates")
    if not isinstance(cands, list) or len(cands) < 2:
        raise SettingsError("settings.candidates: must list at least two { name, description, examples? } maps")
    parsed: list[Candidate] = []
    for i, c in enumerate(cands):
        where = f"settings.candidates[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            raise SettingsError(f"{where}.name: must be a member's model name or tag")
        if not isinstance(c.get("description"), str) or not c["description"].strip():
            raise SettingsError(f"{where}.description: must say what this candidate is for (non-empty text)")
        ex = c.get("examples", [])
        if not isinstance(ex, list) or not all(isinstance(e, str) and e.strip() for e in ex):
            raise SettingsError(f"{where}.examples: must be a list of non-empty texts")
        extra_c = sorted(set(c) - {"name", "description", "examples"})
        if extra_c:
            raise SettingsError(f"{where}.{extra_c[0]}: not a candidate setting (known: description, examples, name)")
        parsed.append(Candidate(c["name"], c["description"], tuple(ex)))
    names = [c.name for c in parsed]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise SettingsError(f"settings.candidates: '{dup}' is listed twice")
    multi = raw.get("multi", False)
    if type(multi) is not bool:
        raise SettingsError(f"settings.multi: must be true or false, found {multi!r}")
    fb_low = raw.get("fallback_on_low_confidence", False)
    if type(fb_low) is not bool:
        raise SettingsError(f"settings.fallback_on_low_confidence: must be true or false, found {fb_low!r}")
    low: tuple[str, ...] = ()
    if "on_low_confidence" in raw:
        try:
            low = names_of(raw["on_low_confidence"], "settings.on_low_confidence")
        except RulesError as e:
            raise SettingsError(str(e)) from None
        if fb_low:
            raise SettingsError("settings.on_low_confidence: set either on_low_confidence or "
                                "fallback_on_low_confidence: true, not both")
    temperature = _num(raw, "temperature", 0.05, 1e-6, 100.0, "settings")
    faults = header_faults(_schema(), raw)
    if faults:
        raise SettingsError(f"settings.{faults[0][0]}: {faults[0][1]}")
    cel_headers = raw.get("headers", [])
    if not isinstance(cel_headers, list) or not all(isinstance(h, str) and h.strip() for h in cel_headers):
        raise SettingsError("settings.headers: must be a list of request header names")
    allowed = tuple(dict.fromkeys(h.strip().lower() for h in cel_headers))
    state = _map(raw, "state", ("max_bytes", "redact", "headers"))
    headers = state.get("headers", [])
    if not isinstance(headers, list) or not all(isinstance(h, str) and h.strip() for h in headers):
        raise SettingsError("settings.state.headers: must be a list of request header names")
    max_bytes = _int(state, "max_bytes", 8192, 64, "settings.state")
    redact_src = state.get("redact", [])
    if not isinstance(redact_src, list) or not all(isinstance(p, str) for p in redact_src):
        raise SettingsError("settings.state.redact: must be a list of JSONPath expressions")
    from jsonpath_ng.ext import parse as jsonpath

    redact = []
    for i, path in enumerate(redact_src):
        try:
            redact.append(jsonpath(path))
        except Exception as e:  # noqa: BLE001 - jsonpath-ng raises its own parser errors
            raise SettingsError(f"settings.state.redact[{i}]: '{path}' is not a JSONPath: {e}") from None
    cache = _map(raw, "cache", ("size", "ttl", "key"))
    budget = _map(raw, "budget", ("max_calls_per_minute", "max_tokens_per_hour"))
    fallback_raw = raw.get("fallback", [])
    if not isinstance(fallback_raw, list):
        raise SettingsError("settings.fallback: must be a list of rules configurations { match?, rules, default? }")
    try:
        when = compile_expr(raw["when"], "settings.when") if "when" in raw else None
        key = compile_expr(cache["key"], "settings.cache.key") if "key" in cache else None
        fallback = tuple(RuleSet(f, f"settings.fallback[{i}]") for i, f in enumerate(fallback_raw))
        for where, text in (("settings.when", raw.get("when")), ("settings.cache.key", cache.get("key"))):
            fault = header_fault(text, allowed, "settings.headers")
            if fault:
                raise RulesError(f"{where}: {fault}")
        for i, f in enumerate(fallback):
            check_headers(f.rules, allowed, f"settings.fallback[{i}]", "settings.headers")
    except RulesError as e:
        raise SettingsError(str(e)) from None
    instructions = raw.get("instructions", "")
    if not isinstance(instructions, str):
        raise SettingsError("settings.instructions: must be text")
    return Settings(
        engine=engine, instructions=instructions, candidates=tuple(parsed), multi=multi,
        min_confidence=_num(raw, "min_confidence", 0.5, 0.0, 1.0, "settings"),
        min_margin=_num(raw, "min_margin", 0.0, 0.0, 1.0, "settings"), temperature=temperature,
        on_low_confidence=low, fallback_on_low_confidence=fb_low, max_bytes=int(max_bytes or 8192),
        headers=tuple(dict.fromkeys(h.strip().lower() for h in headers)),
        redact=tuple(redact), redact_src=tuple(redact_src), when=when,
        cache_size=int(_int(cache, "size", 10000, 0, "settings.cache") or 0),
        cache_ttl_s=_num(cache, "ttl", 600, 0, 86400 * 30, "settings.cache"), cache_key=key,
        max_calls_per_minute=_int(budget, "max_calls_per_minute", None, 0, "settings.budget", BUDGET_MAX),
        max_tokens_per_hour=_int(budget, "max_tokens_per_hour", None, 0, "settings.budget", BUDGET_MAX),
        timeout_ms=int(_int(raw, "timeout", 1000, 1, "settings") or 1000), fallback=fallback,
        req_fields=fields_of([raw.get("when", ""), cache.get("key", "")]).union(*(f.fields for f in fallback)),
        generative=generative)


def _schema() -> dict[str, Any]:
    from busbar_ai_router_hook import SETTINGS_SCHEMA

    return SETTINGS_SCHEMA


def _secret(ref: Any, where: str) -> str:
    """``{env: NAME}`` or ``{file: PATH}`` resolved to a non-empty value (whitespace trimmed)."""
    if not isinstance(ref, dict) or len(ref) != 1 or not isinstance(next(iter(ref.values())), str):
        raise SettingsError(f"{where}: must be {{ env: NAME }} or {{ file: PATH }} (a key is never written "
                            f"into the config)")
    kind, name = next(iter(ref.items()))
    if kind == "env":
        value = os.environ.get(name, "").strip()
        if not value:
            raise SettingsError(f"{where}: environment variable {name} is not set or empty")
        return value
    if kind == "file":
        try:
            value = Path(name).read_text("utf-8").strip()
        except OSError as e:
            raise SettingsError(f"{where}: cannot read {name}: {e.strerror}") from None
        if not value:
            raise SettingsError(f"{where}: secret file {name} is empty")
        return value
    raise SettingsError(f"{where}: '{kind}' is not a secret source (env, file)")


def _loopback_url(raw: Any) -> str:
    """``gateway_url`` checked: ``http(s)://`` to a loopback address; returns the Chat Completions URL."""
    where = "settings.gateway_url"
    if not isinstance(raw, str):
        raise SettingsError(f"{where}: required by engine: generative (the gateway's own data listener, e.g. "
                            f"http://127.0.0.1:8080)")
    parts = urlsplit(raw)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme not in ("http", "https") or not loopback or parts.query or parts.fragment:
        raise SettingsError(f"{where}: '{raw}' is not this gateway's own listener; use http(s)://127.0.0.1:<port> "
                            f"(a loopback address: the router's calls go through this gateway's pools)")
    return raw.rstrip("/") + "/v1/chat/completions"


def _generative(raw: dict[str, Any]) -> Generative:
    url = _loopback_url(raw.get("gateway_url"))
    key = _secret(raw["gateway_key"], "settings.gateway_key") if "gateway_key" in raw else None
    pool = raw.get("pool")
    if not isinstance(pool, str) or not pool:
        raise SettingsError("settings.pool: required by engine: generative (the pool the router's own calls go "
                            "through)")
    model = raw.get("model")
    if not isinstance(model, str) or not model:
        raise SettingsError("settings.model: required by engine: generative (a member model of settings.pool)")
    fb = raw.get("fallback_models", [])
    if not isinstance(fb, list) or not all(isinstance(m, str) and m for m in fb):
        raise SettingsError("settings.fallback_models: must be a list of member models of settings.pool")
    models = (model, *fb)
    dup = next((m for m in models if models.count(m) > 1), None)
    if dup is not None:
        raise SettingsError(f"settings.fallback_models: '{dup}' is named twice (model and fallback_models)")
    retry = _map(raw, "retry", ("attempts", "backoff", "max"))
    return Generative(url, key, pool, models,
                      attempts=int(_int(retry, "attempts", 2, 1, "settings.retry") or 2),
                      backoff_ms=int(_int(retry, "backoff", 50, 0, "settings.retry") or 0),
                      max_backoff_ms=int(_int(retry, "max", 1000, 0, "settings.retry") or 0))
