"""CEL routing rules over a gate's projection: one implementation for every first-party router.

A *rules configuration* is ``{match: first|all, rules: [{when: <CEL>, to: [name, ...]}, ...],
default?: [name, ...]}``; a *name* is a pool member's model name or one of its tags. The CEL
library is ``cel-expr-python`` (Google's C++ CEL runtime; imported on first use, so the sdk does
not need it unless a plugin compiles rules).

- :func:`compile_expr` compiles one expression (a syntax or type error raises :class:`RulesError`
  naming the setting and carrying CEL's own message).
- :class:`RuleSet` compiles a whole configuration at ``configure``; :meth:`RuleSet.decide` returns
  the :class:`Outcome` for one request.
- :func:`req_object` builds the ``req`` variable from a ``decide`` message's projection (see
  docs/router.md#the-req-object): ``pool``, ``ingress_protocol``, ``message_count``, ``has_tools``,
  ``total_chars``, ``max_tokens``? (absent when the caller set none), ``stream``, ``prompt``? (only
  under the ``prompt: ro`` grant: system then every message's text, joined by newlines),
  ``user``? (only under ``user: ro``), ``headers``? (``{lower-cased name: value}``, only when the
  instance's settings allowlist headers: :func:`header_refs` checks the names a rule reads) and
  ``candidates`` (the healthy members as maps: ``model``, ``provider``, ``tags``, ``tier``?,
  ``weight``...).
- :func:`reply_for` turns chosen names into a reply arm: ``order`` (members named first, in the
  order named; a tag stands for its members in pool order) or ``restrict`` (``tags_any``: the tags
  named, each also as ``model:<name>``, the implicit tag every member carries for its model).

A rule whose expression cannot be evaluated for a request (a missing key, a type error) does not
hold; so does a rule whose value is not the boolean ``true``.

Speed: a rule set of up to :data:`COMBINE_MAX` rules is also compiled as one program (``first``:
``r0 ? 0 : (r1 ? 1 : ... -1)``; ``all``: ``[r0, r1, ...]``), evaluated in a single call; only when
that program errors (some rule could not be evaluated, or is not a boolean) are the rules evaluated
one by one, which gives the same answer rule by rule. One call instead of ten is most of the cost.
:meth:`RuleSet.decide` also takes the ``req`` mapping itself: the combined program then reads it
without an activation object (one is built only when the rules must be evaluated one by one).

Source: docs/router.md#busbar-rules-hook, docs/hooks.md#what-a-gate-may-answer.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from busbar_sdk.wire import MAX_RESTRICT_TAGS, MODEL_TAG_PREFIX

__all__ = ["COMBINE_MAX", "MATCH_MODES", "REQ_FIELDS", "Outcome", "Rule", "RuleSet", "RulesError", "activation",
           "check_headers", "compile_expr", "fields_of", "header_fault", "header_refs", "holds", "names_of",
           "reply_for", "req_object"]

MATCH_MODES = ("first", "all")
#: Every field of ``req`` (:func:`req_object`).
REQ_FIELDS = frozenset({"pool", "ingress_protocol", "message_count", "has_tools", "total_chars", "max_tokens",
                        "stream", "prompt", "user", "headers", "candidates"})
_FIELD = re.compile(r"\breq\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_ANY_REQ = re.compile(r"\breq\b")
_HEADER_INDEX = re.compile(r"\breq\s*\.\s*headers\s*\[\s*(?:'([^'\\]*)'|\"([^\"\\]*)\")\s*\]")
_HEADER_IN = re.compile(r"(?:'([^'\\]*)'|\"([^\"\\]*)\")\s+in\s+req\s*\.\s*headers\b")
#: The ``req`` fields copied from the projection's ``request`` as they are.
_SCALARS = ("pool", "ingress_protocol", "message_count", "has_tools", "total_chars", "max_tokens", "stream")
#: fields -> the scalar keys among them (a handful of distinct field sets per process).
_SCALAR_KEYS: dict[frozenset[str], tuple[str, ...]] = {}
#: Largest rule set also compiled as one combined program.
COMBINE_MAX = 64


class RulesError(ValueError):
    """A rules configuration that cannot run: one line naming the setting (``settings.rules[2].when: ...``)."""


_ENV: Any = None
_BOOL: Any = None


def _env() -> Any:
    global _ENV, _BOOL
    if _ENV is None:
        from cel_expr_python import cel  # type: ignore[import-untyped,import-not-found,unused-ignore]  # a compiled module, no stubs

        _ENV = cel.NewEnv(variables={"req": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)})
        _BOOL = cel.Type.BOOL
    return _ENV


def compile_expr(text: Any, where: str) -> Any:
    """Compile one CEL expression over ``req``; raises :class:`RulesError` at ``where`` (a key path
    such as ``settings.rules[0].when``) with CEL's message."""
    if not isinstance(text, str) or not text.strip():
        raise RulesError(f"{where}: must be a CEL expression (a non-empty string), found {text!r}")
    try:
        return _env().compile(text)
    except Exception as e:  # noqa: BLE001 - the CEL library raises RuntimeError with its diagnostics
        msg = " ".join(str(e).split())
        raise RulesError(f"{where}: CEL: {msg}") from None


def fields_of(texts: Iterable[str]) -> frozenset[str]:
    """The ``req`` fields the expressions ``texts`` read (all of them when one reads ``req`` other
    than as ``req.<field>``, e.g. ``req["prompt"]``): what :func:`req_object` must build. Building
    only those is most of a decision's cost saved (the activation converts every field it is given)."""
    out: set[str] = set()
    for text in texts:
        named = _FIELD.findall(text)
        if len(named) != len(_ANY_REQ.findall(text)):
            return REQ_FIELDS
        out.update(n for n in named if n in REQ_FIELDS)
    return frozenset(out)


def header_refs(text: str) -> list[str]:
    """The header names ``text`` reads as literals (``req.headers['x-tenant']``,
    ``"x-tenant" in req.headers``), in order; what a configure checks against the allowlist."""
    out = [a or b for a, b in _HEADER_INDEX.findall(text)]
    out += [a or b for a, b in _HEADER_IN.findall(text)]
    return list(dict.fromkeys(out))


def check_headers(rules: Sequence[Rule], allowed: Sequence[str], prefix: str, setting: str) -> None:
    """Refuse (:class:`RulesError`) the first rule whose ``when`` fails :func:`header_fault`
    (``allowed``: the instance's lower-cased allowlist, found at ``setting``)."""
    for i, r in enumerate(rules):
        fault = header_fault(r.when, allowed, setting)
        if fault:
            raise RulesError(f"{prefix}.rules[{i}].when: {fault}")


def header_fault(text: Any, allowed: Sequence[str], setting: str) -> str:
    """What is wrong with the headers the CEL expression ``text`` reads (``""``: nothing): it reads
    ``req.headers`` while ``allowed`` (the instance's lower-cased allowlist, found at the setting
    named ``setting``, e.g. ``settings.headers``) is empty, or names a header literal not in it (a
    name with capitals is pointed at its lower-case spelling: names are projected lower-cased).
    One rule for the plugins' ``configure`` and the kernel's ``x-busbar-cel`` check."""
    if not isinstance(text, str) or "headers" not in fields_of([text]):
        return ""
    if not allowed:
        return f"reads req.headers but {setting} lists no header; only the headers listed there are projected"
    for name in header_refs(text):
        if name in allowed:
            continue
        if name.lower() in allowed:
            return f"header names in req.headers are lower-case; write '{name.lower()}', not '{name}'"
        return f"reads header '{name}', which {setting} does not list ({', '.join(allowed)}); add it there"
    return ""


def holds(expr: Any, activation: Any) -> bool:
    """Does ``expr`` evaluate to the boolean ``true``? Errors (missing keys...) do not hold."""
    try:
        v = expr.eval(activation)
    except Exception:  # noqa: BLE001 - an evaluation fault is "does not hold"
        return False
    return bool(v.type() == _BOOL and v.value() is True)


def activation(req: Mapping[str, Any]) -> Any:
    """The CEL activation binding ``req``."""
    return _env().Activation({"req": req})


def names_of(raw: Any, where: str) -> tuple[str, ...]:
    """A ``to``/``default`` list: 1+ non-empty strings; raises :class:`RulesError` at ``where``."""
    if not isinstance(raw, list) or not raw or not all(isinstance(n, str) and n for n in raw):
        raise RulesError(f"{where}: must be a list of member model names or tags (at least one), found {raw!r}")
    return tuple(dict.fromkeys(raw))


@dataclass(frozen=True, slots=True)
class Rule:
    """One compiled rule: its source ``when``, the compiled program, the names it routes ``to``."""

    when: str
    program: Any
    to: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a rule set decided: ``names`` (empty: nothing held and no default), ``rules`` (indexes
    of the rules that held, in order), ``default`` (the default served)."""

    names: tuple[str, ...]
    rules: tuple[int, ...]
    default: bool


class RuleSet:
    """A compiled rules configuration (see the module docstring).

    Raises :class:`RulesError` (naming ``<prefix>.rules[i].when`` etc.) for a bad configuration.
    """

    def __init__(self, raw: Any, prefix: str = "settings"):
        if not isinstance(raw, Mapping):
            raise RulesError(f"{prefix}: must be a map with rules: [...], found {type(raw).__name__}")
        known = {"match", "rules", "default"}
        extra = sorted(set(raw) - known)
        if extra:
            raise RulesError(f"{prefix}.{extra[0]}: not a rules setting (known: default, match, rules)")
        match = raw.get("match", "first")
        if match not in MATCH_MODES:
            raise RulesError(f"{prefix}.match: must be first or all, found {match!r}")
        self.match: str = match
        rules = raw.get("rules", [])
        if not isinstance(rules, list):
            raise RulesError(f"{prefix}.rules: must be a list of {{ when, to }} maps")
        out = []
        for i, r in enumerate(rules):
            where = f"{prefix}.rules[{i}]"
            if not isinstance(r, Mapping) or set(r) != {"when", "to"}:
                raise RulesError(f"{where}: must be a map with exactly when: <CEL> and to: [names], found {r!r}")
            out.append(Rule(str(r["when"]), compile_expr(r["when"], f"{where}.when"),
                            names_of(r["to"], f"{where}.to")))
        self.rules: tuple[Rule, ...] = tuple(out)
        #: The ``req`` fields these rules read (:func:`fields_of`).
        self.fields = fields_of(r.when for r in out)
        self.default: tuple[str, ...] = (names_of(raw["default"], f"{prefix}.default") if "default" in raw
                                         else ())
        #: The outcomes of ``match: first`` (rule ``i`` held: ``firsts[i]``) and of no rule holding
        #: (:class:`Outcome` is immutable: built once here, not per request).
        self.firsts = tuple(Outcome(r.to, (i,), False) for i, r in enumerate(out))
        self.fallen = Outcome(self.default, (), bool(self.default))
        self.combined: Any = None
        if 1 < len(out) <= COMBINE_MAX:
            if match == "first":
                text = "-1"
                for i in reversed(range(len(out))):
                    text = f"(({out[i].when}) ? {i} : {text})"
            else:
                text = "[" + ", ".join(f"({r.when})" for r in out) + "]"
            try:
                self.combined = _env().compile(text)
            except Exception:  # noqa: BLE001 - every rule compiled alone; the combination is an optimization
                self.combined = None

    def decide(self, act: Any) -> Outcome:
        """The outcome for one request: ``act`` is its activation (:func:`activation`) or its
        ``req`` mapping (:func:`req_object`; faster when the combined program decides)."""
        fast = self._combined(act)
        if fast is not None:
            return fast
        if isinstance(act, Mapping):
            act = activation(act)
        if self.match == "first":
            for i, r in enumerate(self.rules):
                if holds(r.program, act):
                    return self.firsts[i]
        else:
            held = [i for i, r in enumerate(self.rules) if holds(r.program, act)]
            if held:
                names = tuple(dict.fromkeys(n for i in held for n in self.rules[i].to))
                return Outcome(names, tuple(held), False)
        return self.fallen

    def _combined(self, act: Any) -> Outcome | None:
        """The outcome from the combined program, or ``None`` when it errors (or there is none)."""
        prog = self.combined
        if prog is None:
            return None
        try:
            # positional (activation, data): pybind11 parses keyword arguments noticeably slower
            v = (prog.eval(None, {"req": act}) if type(act) is dict or isinstance(act, Mapping)
                 else prog.eval(act)).value()
        except Exception:  # noqa: BLE001 - an error: the per-rule path decides
            return None
        if self.match == "first":
            if type(v) is not int:
                return None
            return self.firsts[v] if v >= 0 else self.fallen
        if not isinstance(v, list) or len(v) != len(self.rules):
            return None
        flags = [getattr(x, "value", lambda x=x: x)() for x in v]
        if not all(type(f) is bool for f in flags):
            return None
        held = [i for i, f in enumerate(flags) if f]
        if held:
            return Outcome(tuple(dict.fromkeys(n for i in held for n in self.rules[i].to)), tuple(held), False)
        return self.fallen


def req_object(request: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]],
               fields: frozenset[str] = REQ_FIELDS) -> dict[str, Any]:
    """The ``req`` variable for one ``decide`` message (see the module docstring), with only
    ``fields`` (default: every field)."""
    keys = _SCALAR_KEYS.get(fields)
    if keys is None:
        keys = _SCALAR_KEYS[fields] = tuple(k for k in _SCALARS if k in fields)
    req: dict[str, Any] = {}
    for k in keys:                      # loops, not comprehensions: no extra frame per request
        if k in request:
            req[k] = request[k]
    messages = request.get("messages") if "prompt" in fields else None
    if messages is not None:
        system = request.get("system")
        parts = [system] if system else []
        for m in messages:
            parts.append(m.get("text", ""))
        req["prompt"] = "\n".join(parts)
    user = request.get("user") if "user" in fields else None
    if user is not None:
        req["user"] = dict(user)
    headers = request.get("headers") if "headers" in fields else None
    if headers is not None:
        req["headers"] = headers              # the activation converts (copies) it
    if "candidates" in fields:
        req["candidates"] = candidates         # the activation converts (copies) it
    return req


def reply_for(names: Sequence[str], mode: str, candidates: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The reply arm for the chosen ``names``: ``mode`` ``order`` or ``restrict`` (see the module
    docstring); ``{}`` (abstain) when ``names`` is empty or, for ``order``, names no healthy
    candidate."""
    if not names:
        return {}
    if mode == "restrict":              # a name is a tag, or a model: its implicit tag (healthy or not)
        tags = [t for n in names for t in (n, MODEL_TAG_PREFIX + n)]
        return {"restrict": {"tags_any": list(dict.fromkeys(tags))[:MAX_RESTRICT_TAGS]}}
    if len(names) == 1:                 # one name (the usual rule): no duplicate to skip
        n = names[0]
        order = []
        for c in candidates:            # a loop, not a comprehension: no extra frame per request
            if c.get("model") == n or n in (c.get("tags") or ()):
                order.append(int(c["idx"]))
        return {"order": order} if order else {}
    order = []
    for n in names:
        for c in candidates:
            if (c.get("model") == n or n in (c.get("tags") or ())) and c["idx"] not in order:
                order.append(int(c["idx"]))
    return {"order": order} if order else {}
