"""busbar-rules-hook: a gate that routes with CEL conditions over the request projection.

docs/router.md#busbar-rules-hook. Settings::

    match: first            # first (default): order the first holding rule's members first
                            # all: restrict to the union of every holding rule's members
    rules:
      - { when: 'req.has_tools', to: [agent] }                    # a member's model name or a tag
      - { when: 'req.total_chars > 20000', to: [claude-long] }
      - { when: "req.headers['x-tenant'] == 'acme'", to: [acme] }  # needs headers: [x-tenant]
    headers: [x-tenant]     # request headers projected as req.headers (never credentials)
    default: [general]      # when no rule holds; absent: abstain (the pool's SWRR)

Every ``when`` is compiled when the instance opens and on every ``configure`` (a bad expression
refuses the boot, or the configure, with ``settings.rules[<i>].when: CEL: <CEL's message>``). Every
``to``/``default`` name is checked at boot against the members of the pool the ref sits on (the
settings schema marks them ``x-busbar-pool-member``). ``headers`` is the instance's header
allowlist (the schema marks it ``x-busbar-headers``: the kernel projects exactly those headers,
lower-cased, and refuses credentials); a rule that reads ``req.headers`` without it, or reads a
header literal it does not list, is refused the same way. The CEL evaluation, the ``req`` object and
the reply arms are :mod:`busbar_sdk.rules`, shared with busbar-ai-router-hook's fallback chain.

The plugin is a :class:`busbar_sdk.DictHookPlugin` (the wire dicts as they are: no model is parsed)
declared ``inline`` (CPU-only and bounded: it runs on the request path's own thread). ``status``
reports ``rules_decisions_total{rule}`` (the index that served, ``default`` or ``none``).

Source: docs/router.md#busbar-rules-hook, docs/hooks.md#what-a-gate-may-answer.
"""
from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from importlib import resources
from typing import Any, ClassVar

from busbar_sdk import DictHookPlugin, export_plugin
from busbar_sdk.rules import RulesError, RuleSet, check_headers, reply_for, req_object
from busbar_sdk.settings_schema import header_faults, header_names

__all__ = ["SETTINGS_SCHEMA", "Compiled", "RulesHook", "parse", "plugin"]
__version__ = "1.5.0"

SETTINGS_SCHEMA: dict[str, Any] = json.loads(
    resources.files("busbar_rules_hook").joinpath("settings_schema.json").read_text("utf-8"))


class Compiled:
    """One settings map, compiled: ``rules`` (the :class:`RuleSet`), ``headers`` (the lower-cased
    allowlist), ``mode`` (the reply arm: ``order`` for ``match: first``, ``restrict`` for ``all``),
    ``keys`` (the ``rule`` label of each rule index)."""

    __slots__ = ("headers", "keys", "mode", "rules")

    def __init__(self, rules: RuleSet, headers: tuple[str, ...]):
        self.rules = rules
        self.headers = headers
        self.mode = "order" if rules.match == "first" else "restrict"
        self.keys = tuple(str(i) for i in range(len(rules.rules)))


def parse(settings: Any) -> Compiled:
    """Compile a settings map; raises :class:`RulesError` (a ``ValueError``) naming the setting
    (``settings.rules[1].when: CEL: ...``, ``settings.headers[0]: ...``)."""
    if not isinstance(settings, dict):
        raise RulesError(f"settings: must be a map, found {type(settings).__name__}")
    faults = header_faults(SETTINGS_SCHEMA, settings)
    if faults:
        where, text = faults[0]
        raise RulesError(f"settings.{where}: {text}")
    headers = header_names(SETTINGS_SCHEMA, settings)
    rules = RuleSet({k: v for k, v in settings.items() if k != "headers"}, "settings")
    check_headers(rules.rules, headers, "settings", "settings.headers")
    return Compiled(rules, headers)


class RulesHook(DictHookPlugin):
    """One configured instance: the compiled settings and its decision counters."""

    inline: ClassVar[bool] = True
    settings_schema: ClassVar[dict[str, Any] | None] = SETTINGS_SCHEMA

    def __init__(self, settings: dict[str, Any]):
        try:
            self.c = parse(settings)
        except RulesError as e:
            raise ValueError(f"busbar-rules-hook: {e}") from None
        super().__init__(settings)
        self.settings_version = 0
        #: Decisions by the ``rule`` label that served: one ``itertools.count`` per label, advanced
        #: with ``next`` (one C call: atomic under the GIL, so no lock on the request path, whatever
        #: thread the kernel calls from); :meth:`status` reads them (:func:`_count_value`).
        self.served: dict[str, Iterator[int]] = {}

    def decide(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One ``decide``: the reply arm (``{}`` when nothing holds and there is no default)."""
        c = self.c
        rules = c.rules
        cands = payload.get("candidates") or []
        out = rules.decide(req_object(payload.get("request") or {}, cands, rules.fields))
        key = c.keys[out.rules[0]] if out.rules else ("default" if out.default else "none")
        counter = self.served.get(key)
        if counter is None:
            counter = self.served.setdefault(key, itertools.count())
        next(counter)
        return reply_for(out.names, c.mode, cands)

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        version = body.get("settings_version")
        settings = body.get("settings", {})
        try:
            new = parse(settings)
        except RulesError as e:
            return {"error": f"busbar-rules-hook: {e}"}
        self.c, self.settings, self.settings_version = new, dict(settings), int(version or 0)
        return {"ack": {"settings_version": version}}

    def status(self) -> dict[str, Any]:
        metrics = [{"name": "rules_decisions_total", "type": "counter", "value": _count_value(n),
                    "labels": {"rule": k}, "help": "decisions by the rule that served (index, default or none)"}
                   for k, n in sorted(self.served.copy().items())][:64]
        return {"status": {"settings_version": self.settings_version, "settings": self.settings,
                           "metrics": metrics}}


def _count_value(counter: Iterator[int]) -> int:
    """How many times ``next`` was called on an ``itertools.count()`` (its next value), read without
    advancing it (its ``repr`` is ``count(<n>)``)."""
    return int(repr(counter)[6:-1])


#: The ``busbar.plugins`` entry point (``busbar_rules_hook:plugin``).
plugin = export_plugin(RulesHook)
