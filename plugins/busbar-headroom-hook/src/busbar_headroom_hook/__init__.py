"""busbar-headroom-hook: a ``prompt: rw`` rewrite gate that compresses context before dispatch.

docs/hooks-firstparty.md#busbar-headroom-hook: it fires on the ``transform`` pass, before dispatch and before the
routing decision, and answers ``{"rewrite": {"messages": [...]}}`` (body form, ``{role, content}``) or
``{}``. The method (:mod:`busbar_headroom_hook._compress`) is deterministic and meaning-preserving:
whitespace normalization outside code, repeated blocks collapsed to a reference to their latest
copy, and stale long fenced outputs cut to head and tail with a marker. The last message (the
current ask) is never modified.

Never corrupting a request comes first. The rewrite arm replaces the body's messages and is not
index-aligned: a turn written back as text keeps only its text. The projection shows text only,
so Headroom rewrites only when the text it sees *is* the whole request, and abstains (``{}``, the
body proceeds byte-identical) otherwise:

* no ``request.messages`` (the ``prompt: rw`` grant is missing) — reason ``no_prompt``;
* ``has_tools`` (tool_use / tool_result blocks would be flattened) — ``tools``;
* a role other than ``user``/``assistant`` (``tool``, ``function``, ``developer`` ...) — ``roles``;
* a turn with no text (an image- or file-only turn) — ``non_text_turn``;
* replayed redacted reasoning (``[busbar:redacted_reasoning]``) — ``redacted_reasoning``;
* too little text (``min_chars``), too much (``max_input_chars``), or too little saved
  (``min_savings_pct``, ``min_savings_chars``) — ``too_short``, ``too_long``, ``below_threshold``;
* any internal fault — ``error`` (counted, never raised: a broken compressor never touches a
  request, whatever the gate's ``on_error``).

``status`` reports ``chars_saved_total`` and friends per pool (the metrics array of docs/hooks.md#management-messages);
``describe`` serves the settings schema; ``configure`` applies settings as
desired state and acks only what it could apply.

Source: docs/hooks-firstparty.md#busbar-headroom-hook, docs/hooks.md#what-a-gate-may-answer (rewrite),
docs/hooks.md#management-messages.
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from importlib import resources
from typing import Any, ClassVar

from busbar_sdk import HookPlugin, Rewrite, export_plugin
from busbar_sdk.models import (
    BodyMessage,
    ConfigureAck,
    ConfigureMessage,
    Metric,
    StatusReply,
    TransformMessage,
)

from busbar_headroom_hook._compress import Knobs, compress

__all__ = ["SETTINGS_SCHEMA", "HeadroomHook", "SettingsError", "parse_settings", "plugin"]

__version__ = "1.5.0"

SETTINGS_SCHEMA: dict[str, Any] = json.loads(
    resources.files("busbar_headroom_hook").joinpath("settings_schema.json").read_text("utf-8"))
REDACTED_REASONING = "[busbar:redacted_reasoning]"
_TEXT_ROLES = frozenset({"user", "assistant"})
_MAX_METRICS = 64
_GLOBAL_SLOTS = 16  # entries reserved for the pool-less metrics


class SettingsError(ValueError):
    """One line naming the offending ``settings.<key>``."""


class _Settings:
    def __init__(self, knobs: Knobs, min_chars: int, max_input_chars: int, min_savings_pct: float,
                 min_savings_chars: int) -> None:
        self.knobs = knobs
        self.min_chars = min_chars
        self.max_input_chars = max_input_chars
        self.min_savings_pct = min_savings_pct
        self.min_savings_chars = min_savings_chars


def parse_settings(raw: Any) -> _Settings:
    """Validate a settings map as desired state (absent keys take their defaults).

    Raises:
        SettingsError: an unknown key, a wrong type or a value out of range.
    """
    if not isinstance(raw, dict):
        raise SettingsError(f"settings must be a map, found {type(raw).__name__}")
    props = SETTINGS_SCHEMA["properties"]
    unknown = sorted(set(raw) - set(props))
    if unknown:
        raise SettingsError(f"settings.{unknown[0]} is not a Headroom setting (known: {', '.join(sorted(props))})")
    values: dict[str, Any] = {}
    for key, spec in props.items():
        v = raw.get(key, spec["default"])
        if spec["type"] == "boolean":
            ok = type(v) is bool
        elif spec["type"] == "integer":
            ok = type(v) is int and spec["minimum"] <= v <= spec["maximum"]
        else:
            ok = type(v) in (int, float) and spec["minimum"] <= v <= spec["maximum"]
        if not ok:
            bound = f" in {spec['minimum']}..{spec['maximum']}" if "minimum" in spec else ""
            raise SettingsError(f"settings.{key} must be a {spec['type']}{bound}, found {v!r}")
        values[key] = v
    if values["truncate_over_chars"] and \
            values["keep_head_chars"] + values["keep_tail_chars"] >= values["truncate_over_chars"]:
        raise SettingsError("settings.keep_head_chars + keep_tail_chars must be below truncate_over_chars")
    knobs = Knobs(whitespace=values["whitespace"], dedup_min_chars=values["dedup_min_chars"],
                  truncate_over_chars=values["truncate_over_chars"], keep_head_chars=values["keep_head_chars"],
                  keep_tail_chars=values["keep_tail_chars"], keep_recent=values["keep_recent"])
    return _Settings(knobs, values["min_chars"], values["max_input_chars"], float(values["min_savings_pct"]),
                     values["min_savings_chars"])


class _PoolStats:
    __slots__ = ("chars_in", "chars_out", "requests", "rewrites")

    def __init__(self) -> None:
        self.requests = self.rewrites = self.chars_in = self.chars_out = 0


class _Metrics:
    """Per-pool tallies behind one lock; the latency reservoir keeps the last 1024 compressions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pools: dict[str, _PoolStats] = {}
        self.abstained: Counter[str] = Counter()
        self.by_method: Counter[str] = Counter()
        self.blocks: Counter[str] = Counter()
        self.latency_us: deque[float] = deque(maxlen=1024)
        self.compressions = 0

    def pool(self, name: str) -> _PoolStats:
        stats = self.pools.get(name)
        if stats is None:
            stats = self.pools[name] = _PoolStats()
        return stats

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            out: list[dict[str, Any]] = []
            ranked = sorted(self.pools.items(), key=lambda kv: (-kv[1].requests, kv[0]))
            room = max(1, (_MAX_METRICS - _GLOBAL_SLOTS) // 5)
            shown, rest = ranked[:room], ranked[room:]
            if rest:  # fold the long tail into one "_other" row so the reply stays within 64 entries
                other = _PoolStats()
                for _, s in [*shown[room - 1:], *rest]:
                    other.requests += s.requests
                    other.rewrites += s.rewrites
                    other.chars_in += s.chars_in
                    other.chars_out += s.chars_out
                shown = [*shown[:room - 1], ("_other", other)]
            for name, s in shown:
                labels = {"pool": name}
                saved = s.chars_in - s.chars_out
                out += [
                    {"name": "headroom_requests_total", "type": "counter", "value": s.requests, "labels": labels,
                     "help": "transform passes seen"},
                    {"name": "headroom_rewrites_total", "type": "counter", "value": s.rewrites, "labels": labels,
                     "help": "requests rewritten (compressed)"},
                    {"name": "chars_saved_total", "type": "counter", "value": saved, "labels": labels,
                     "label": "Characters saved", "viz": "counter",
                     "help": "message characters removed from rewritten requests"},
                    {"name": "tokens_saved_total", "type": "counter", "value": (saved + 3) // 4, "labels": labels,
                     "estimated": True, "label": "Tokens saved (estimate)",
                     "help": "chars_saved_total / 4; the provider-reported usage is the measured truth"},
                    {"name": "headroom_compression_ratio", "type": "gauge",
                     "value": round(s.chars_out / s.chars_in, 4) if s.chars_in else 1.0, "labels": labels,
                     "max": 1, "viz": "gauge", "help": "characters out / characters in over rewritten requests"},
                ]
            out += [{"name": "headroom_abstained_total", "type": "counter", "value": n, "labels": {"reason": r},
                     "help": "transform passes answered {} (the body proceeds unmodified), by reason"}
                    for r, n in sorted(self.abstained.items())][:8]
            out += [{"name": "headroom_chars_saved_by_method_total", "type": "counter", "value": n,
                     "labels": {"method": m}, "help": "characters saved, by compression pass"}
                    for m, n in sorted(self.by_method.items())]
            out += [{"name": "headroom_blocks_total", "type": "counter", "value": n, "labels": {"action": a},
                     "help": "blocks collapsed (deduped) or cut (truncated)"}
                    for a, n in sorted(self.blocks.items())]
            samples = sorted(self.latency_us)
            latency: dict[str, Any] = {"name": "headroom_latency_us", "type": "histogram", "value": self.compressions,
                                       "unit": "us", "viz": "histogram",
                                       "help": "time spent compressing one request (last 1024)"}
            if samples:
                latency["quantiles"] = {k: round(samples[min(len(samples) - 1, int(q * len(samples)))], 1)
                                        for k, q in (("0.5", 0.5), ("0.95", 0.95), ("0.99", 0.99))}
            out.append(latency)
            return out[:_MAX_METRICS]


class HeadroomHook(HookPlugin):
    """The compressor; one instance per configured hook ref."""

    settings_schema: ClassVar[dict[str, Any] | None] = SETTINGS_SCHEMA

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        try:
            self._settings = parse_settings(settings)
        except SettingsError as e:
            raise ValueError(f"busbar-headroom-hook: {e}") from None
        self._metrics = _Metrics()

    # ------------------------------------------------------------------------- management

    def configure(self, message: ConfigureMessage) -> ConfigureAck:
        """Apply the pushed settings (desired state) and ack; a bad map raises (no ack, nothing
        changes)."""
        new = parse_settings(message.configure.settings)
        self._settings = new
        self.settings = dict(message.configure.settings)
        self.settings_version = message.configure.settings_version
        return ConfigureAck(settings_version=message.configure.settings_version)

    def status(self) -> StatusReply:
        return StatusReply(settings_version=self.settings_version if self.settings_version is not None else 0,
                           settings=self.settings, metrics=tuple(Metric(**m) for m in self._metrics.snapshot()))

    # ------------------------------------------------------------------------- the rewrite

    def transform(self, message: TransformMessage) -> Rewrite | None:
        req = message.request
        settings = self._settings
        metrics = self._metrics
        pool = req.pool or "unknown"
        with metrics.lock:
            metrics.pool(pool).requests += 1
        reason = self._refusal(message, settings)
        if reason is not None:
            with metrics.lock:
                metrics.abstained[reason] += 1
            return None
        assert req.messages is not None
        texts = [m.text for m in req.messages]
        before = sum(len(t) for t in texts)
        started = time.perf_counter()
        try:
            result = compress(texts, settings.knobs)
            after = sum(len(t) for t in result.texts)
            saved = before - after
            ok = (len(result.texts) == len(texts) and result.texts[-1] == texts[-1]
                  and all(t.strip() for t in result.texts))
        except Exception:  # noqa: BLE001 - a broken compressor abstains, it never fails a request
            with metrics.lock:
                metrics.abstained["error"] += 1
            return None
        elapsed_us = (time.perf_counter() - started) * 1e6
        with metrics.lock:
            metrics.latency_us.append(elapsed_us)
            metrics.compressions += 1
            if not ok:
                metrics.abstained["error"] += 1
                return None
            if saved < settings.min_savings_chars or saved * 100.0 < settings.min_savings_pct * before or saved <= 0:
                metrics.abstained["below_threshold"] += 1
                return None
            stats = metrics.pool(pool)
            stats.rewrites += 1
            stats.chars_in += before
            stats.chars_out += after
            metrics.by_method.update(result.saved)
            metrics.blocks["deduped"] += result.deduped
            metrics.blocks["truncated"] += result.truncated
        return Rewrite(messages=tuple(BodyMessage(role=m.role, content=text)
                                      for m, text in zip(req.messages, result.texts)))

    @staticmethod
    def _refusal(message: TransformMessage, settings: _Settings) -> str | None:
        """Why this request must not be rewritten, or ``None`` when a text rewrite is lossless."""
        req = message.request
        if not req.messages:
            return "no_prompt"
        if req.has_tools:
            return "tools"
        total = 0
        for m in req.messages:
            if m.role not in _TEXT_ROLES:
                return "roles"
            if not m.text.strip():
                return "non_text_turn"
            if REDACTED_REASONING in m.text:
                return "redacted_reasoning"
            total += len(m.text)
        if len(req.messages) < 2 or total < settings.min_chars:
            return "too_short"
        if total > settings.max_input_chars:
            return "too_long"
        return None


plugin = export_plugin(HeadroomHook)
