"""busbar-rules-hook: a gate that routes with CEL conditions over the request projection.

docs/router.md#busbar-rules-hook. Settings::

    match: first            # first (default): order the first holding rule's members first
                            # all: restrict to the union of every holding rule's members
    rules:
      - { when: 'req.has_tools', to: [agent] }                    # a member's model name or a tag
      - { when: 'req.total_chars > 20000', to: [claude-long] }
    default: [general]      # when no rule holds; absent: abstain (the pool's SWRR)

Every ``when`` is compiled when the instance opens and on every ``configure`` (a bad expression
refuses the boot, or the configure, with ``settings.rules[<i>].when: CEL: <CEL's message>``). Every
``to``/``default`` name is checked at boot against the members of the pool the ref sits on (the
settings schema marks them ``x-busbar-pool-member``). The CEL evaluation, the ``req`` object and
the reply arms are :mod:`busbar_sdk.rules`, shared with busbar-ai-router-hook's fallback chain.

The plugin is CPU-only and bounded (``busbar_inline``): it runs on the request path's own thread.
``status`` reports ``rules_decisions_total{rule}`` (the index that served, ``default`` or
``none``).

Source: docs/router.md#busbar-rules-hook, docs/hooks.md#what-a-gate-may-answer.
"""
from __future__ import annotations

import json
import threading
from collections import Counter
from importlib import resources
from typing import Any

import pluggy
from busbar_sdk.rules import RulesError, RuleSet, activation, reply_for, req_object

__all__ = ["SETTINGS_SCHEMA", "RulesHook", "busbar_abi", "busbar_call", "busbar_open", "busbar_plugin_kind"]
__version__ = "1.5.0"

hookimpl = pluggy.HookimplMarker("busbar")

SETTINGS_SCHEMA: dict[str, Any] = json.loads(
    resources.files("busbar_rules_hook").joinpath("settings_schema.json").read_text("utf-8"))


def parse(settings: Any) -> RuleSet:
    """Compile a settings map; raises ``ValueError`` naming the setting (``settings.rules[1].when: CEL: ...``)."""
    if not isinstance(settings, dict):
        raise RulesError(f"settings: must be a map, found {type(settings).__name__}")
    return RuleSet(settings, "settings")


class RulesHook:
    """One configured instance: the compiled rule set and its decision counters."""

    def __init__(self, settings: dict[str, Any]):
        try:
            self.rules = parse(settings)
        except RulesError as e:
            raise ValueError(f"busbar-rules-hook: {e}") from None
        self.settings = dict(settings)
        self.settings_version = 0
        self.lock = threading.Lock()
        self.served: Counter[str] = Counter()

    def decide(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One ``decide``: the reply arm (``{}`` when nothing holds and there is no default)."""
        cands = payload.get("candidates") or []
        rules = self.rules
        out = rules.decide(activation(req_object(payload.get("request") or {}, cands, rules.fields)))
        key = str(out.rules[0]) if out.rules else ("default" if out.default else "none")
        with self.lock:
            self.served[key] += 1
        return reply_for(out.names, "order" if rules.match == "first" else "restrict", cands)

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        version = body.get("settings_version")
        try:
            new = parse(body.get("settings", {}))
        except RulesError as e:
            return {"error": f"busbar-rules-hook: {e}"}
        self.rules, self.settings, self.settings_version = new, dict(body.get("settings", {})), int(version or 0)
        return {"ack": {"settings_version": version}}

    def status(self) -> dict[str, Any]:
        with self.lock:
            metrics = [{"name": "rules_decisions_total", "type": "counter", "value": n, "labels": {"rule": k},
                        "help": "decisions by the rule that served (index, default or none)"}
                       for k, n in sorted(self.served.items())][:64]
        return {"status": {"settings_version": self.settings_version, "settings": self.settings,
                           "metrics": metrics}}


@hookimpl
def busbar_abi() -> int:
    return 1


@hookimpl
def busbar_plugin_kind() -> str:
    return "hook"


@hookimpl
def busbar_open(settings: dict[str, Any]) -> RulesHook:
    return RulesHook(settings)


@hookimpl
def busbar_call(handle: RulesHook, payload: dict[str, Any]) -> dict[str, Any]:
    op = payload.get("op")
    if op == "decide":
        return handle.decide(payload)
    if op is not None:
        return {}                            # notify / transform: nothing to say
    if "configure" in payload:
        return handle.configure(payload["configure"])
    if "describe" in payload:
        return {"schema": SETTINGS_SCHEMA}
    if "status" in payload:
        return handle.status()
    return {}


busbar_call.busbar_inline = True             # type: ignore[attr-defined]  # CPU-only and bounded
