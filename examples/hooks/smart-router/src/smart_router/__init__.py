"""smart-router: docs/hooks-firstparty.md's "smart router" as a hook plugin — classify, score, sort.

One class, two transports, the same decision:

* in-process: pack this project (``busbar-plugin-pack pack --wheel examples/hooks/smart-router
  ...``) and attach it as a gate;
* out of process: ``python -m busbar_sdk.sidecar smart_router:plugin --port 8787`` (or
  ``python -m smart_router.sidecar``) behind ``busbar-webrequest-hook``.

The policy (:mod:`smart_router.policy`) is pure and deterministic, so both answer byte-identical
``{"order": [...]}`` replies for the same payload. The scoring is documented there and in
README.md.

Settings (all optional; ``describe`` serves the schema)::

    boost: 0.5                  # the favourite's head start
    near_limit: 0.2             # rate_headroom below this trims the score proportionally
    long_form_max_tokens: 4096  # max_tokens at or above: long-form
    long_form_chars: 24000      # total_chars at or above: long-form (~6k tokens)
    buckets:                    # per bucket: favourite (a tier or tag) and weights
      agent: { favourite: fable, price: 0.2, latency: 0.4, capacity: 0.4 }

Source: docs/hooks-firstparty.md (the whole essay); docs/hooks.md#what-a-hook-receives;
docs/hooks.md#what-a-gate-may-answer (order).
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any, ClassVar

from busbar_sdk import HookPlugin, Order, export_plugin
from busbar_sdk.models import ConfigureAck, ConfigureMessage, DecideMessage, Metric, StatusReply

from smart_router.policy import BUCKETS, Bucket, Lane, Policy, Shape, rank

__all__ = ["SETTINGS_SCHEMA", "SmartRouter", "parse_policy", "plugin"]

_WEIGHT = {"type": "number", "minimum": 0, "maximum": 10}
SETTINGS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "smart-router settings",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "boost": {"type": "number", "minimum": 0, "maximum": 10, "default": 0.5,
                  "description": "Score added to the bucket's favourite lane (a head start, not the win)."},
        "near_limit": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.2,
                       "description": "A lane whose rate_headroom is below this has its score scaled by "
                                      "rate_headroom / near_limit; 0 turns trimming off."},
        "long_form_max_tokens": {"type": "integer", "minimum": 1, "default": 4096,
                                 "description": "max_tokens at or above this classifies as long-form."},
        "long_form_chars": {"type": "integer", "minimum": 1, "default": 24000,
                            "description": "total_chars at or above this classifies as long-form."},
        "buckets": {
            "type": "object", "additionalProperties": False,
            "description": "Per task bucket: the favourite lane (matched against tier, then tags) and the "
                           "weights of price, latency and free capacity.",
            "properties": {b: {"type": "object", "additionalProperties": False,
                               "properties": {"favourite": {"type": "string", "minLength": 1},
                                              "price": _WEIGHT, "latency": _WEIGHT, "capacity": _WEIGHT}}
                           for b in BUCKETS},
        },
    },
}


def _number(value: Any, key: str, lo: float, hi: float) -> float:
    if type(value) not in (int, float) or not lo <= value <= hi:
        raise ValueError(f"settings.{key} must be a number in {lo:g}..{hi:g}, found {value!r}")
    return float(value)


def _integer(value: Any, key: str) -> int:
    if type(value) is not int or value < 1:
        raise ValueError(f"settings.{key} must be a positive integer, found {value!r}")
    return value


def parse_policy(settings: Any) -> Policy:
    """Settings (desired state: absent keys take their defaults) into a :class:`Policy`.

    Raises:
        ValueError: an unknown key or a bad value, naming it.
    """
    if not isinstance(settings, dict):
        raise ValueError("settings must be a map")  # noqa: TRY004 - every settings fault is a ValueError
    unknown = sorted(set(settings) - set(SETTINGS_SCHEMA["properties"]))
    if unknown:
        raise ValueError(f"settings.{unknown[0]} is not a smart-router setting")
    default = Policy()
    buckets = dict(default.buckets)
    raw_buckets = settings.get("buckets", {})
    if not isinstance(raw_buckets, dict):
        raise ValueError(  # noqa: TRY004 - every settings fault is a ValueError
            "settings.buckets must be a map of bucket name to {favourite, price, latency, capacity}")
    for name, spec in raw_buckets.items():
        if name not in BUCKETS:
            raise ValueError(f"settings.buckets.{name}: unknown bucket (known: {', '.join(BUCKETS)})")
        if not isinstance(spec, dict) or set(spec) - {"favourite", "price", "latency", "capacity"}:
            raise ValueError(f"settings.buckets.{name} takes favourite, price, latency, capacity")
        base = buckets[name]
        fav = spec.get("favourite", base.favourite)
        if not isinstance(fav, str) or not fav:
            raise ValueError(f"settings.buckets.{name}.favourite must be a non-empty tier or tag")
        buckets[name] = Bucket(fav, *(_number(spec.get(k, getattr(base, k)), f"buckets.{name}.{k}", 0, 10)
                                      for k in ("price", "latency", "capacity")))
    return Policy(buckets=buckets,
                  boost=_number(settings.get("boost", default.boost), "boost", 0, 10),
                  near_limit=_number(settings.get("near_limit", default.near_limit), "near_limit", 0, 1),
                  long_form_max_tokens=_integer(settings.get("long_form_max_tokens", default.long_form_max_tokens),
                                                "long_form_max_tokens"),
                  long_form_chars=_integer(settings.get("long_form_chars", default.long_form_chars),
                                           "long_form_chars"))


class SmartRouter(HookPlugin):
    """A gate whose ``decide`` replies with an ``order``; ``{}`` when there is nothing to rank."""

    settings_schema: ClassVar[dict[str, Any] | None] = SETTINGS_SCHEMA

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        self._policy = parse_policy(settings)
        self._lock = threading.Lock()
        self._decisions: Counter[str] = Counter()

    def decide(self, message: DecideMessage) -> Order | None:
        if not message.candidates:
            return None
        req = message.request
        shape = Shape(has_tools=req.has_tools, max_tokens=req.max_tokens, total_chars=req.total_chars,
                      message_count=req.message_count, stream=req.stream)
        lanes = [Lane(idx=c.idx, tier=c.tier, tags=c.tags, cost_per_mtok=c.cost_per_mtok,
                      latency_ms=c.latency_ms, available_concurrency=c.available_concurrency,
                      rate_headroom=c.rate_headroom) for c in message.candidates]
        bucket, order = rank(shape, lanes, self._policy)
        with self._lock:
            self._decisions[bucket] += 1
        return Order(order=tuple(order))

    def configure(self, message: ConfigureMessage) -> ConfigureAck:
        self._policy = parse_policy(message.configure.settings)  # raises: no ack, nothing changes
        return super().configure(message)

    def status(self) -> StatusReply:
        with self._lock:
            metrics = tuple(Metric(name="smart_router_decisions_total", type="counter", value=n,
                                   labels={"bucket": b}, help="orders returned, by task bucket")
                            for b, n in sorted(self._decisions.items()))
        return StatusReply(settings_version=self.settings_version if self.settings_version is not None else 0,
                           settings=self.settings, metrics=metrics)


plugin = export_plugin(SmartRouter)
