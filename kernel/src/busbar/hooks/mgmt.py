"""Management replies: the configure ack rule, describe's schema, status and its bounded metrics.

- ``is_ack(reply, version)``: ``{"ack": {"settings_version": <exactly version>}}`` (an int, not a
  bool, equal); extra fields are allowed.
- ``read_describe(reply)``: the ``schema`` member when it is an object, else ``None``.
- ``read_status(reply, desired_version)``: ``{"status": {"settings_version", "settings",
  "metrics": [...]}}`` -> :class:`StatusReport`, or ``None`` for ``{}`` / anything else
  (status unsupported). ``drift``: ``in_sync`` | ``drift`` | ``unknown`` (no version reported).

Metric bounds (a hook with ``prompt: ro`` must not be able to smuggle content into a scrape):
at most 64 entries per reply and 8 labels per entry; ``name`` matches ``^[a-z][a-z0-9_]{0,63}$``,
``type`` is counter | gauge | histogram, label keys match ``^[a-zA-Z_][a-zA-Z0-9_]{0,63}$``; every
string is sanitized (control, bidi, zero-width stripped) and length-bounded; every number is
finite. A malformed entry (not an object, bad name or type) is dropped whole; a malformed optional
member (value, labels, quantiles, estimated, ci_low, ci_high, label, unit, viz, max, help) is
dropped on its own; the reply is never refused for a bad entry.

Source: docs/hooks.md#management-messages
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from busbar.hooks.reply import _STRIP

MAX_METRICS = 64
MAX_LABELS = 8
MAX_QUANTILES = 16
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_LABEL_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
_TYPES = frozenset({"counter", "gauge", "histogram"})
_VIZ = frozenset({"counter", "gauge", "sparkline", "histogram"})
_TEXT_LIMITS = {"label": 64, "unit": 16, "help": 256}
LABEL_VALUE_MAX = 128

__all__ = ["MAX_LABELS", "MAX_METRICS", "StatusReport", "brief", "is_ack", "read_describe", "read_metric",
           "read_status"]


@dataclass(frozen=True)
class StatusReport:
    """A hook's reported state (``GET /api/v1/admin/hooks/{name}/status``).

    Attributes:
        settings_version: what the hook reports running, or ``None``.
        settings: the settings it reports (an object, else ``{}``).
        metrics: the kept metric entries (at most 64), each a plain dict.
        dropped: entries dropped whole.
        drift: ``in_sync`` | ``drift`` | ``unknown`` against the desired version.
    """

    settings_version: int | None
    settings: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[dict[str, Any], ...] = ()
    dropped: int = 0
    drift: str = "unknown"


def is_ack(reply: Any, version: int) -> bool:
    """True when ``reply`` acknowledges exactly ``version``."""
    if not isinstance(reply, dict):
        return False
    ack = reply.get("ack")
    if not isinstance(ack, dict):
        return False
    got = ack.get("settings_version")
    return type(got) is int and got == version


def brief(reply: Any, limit: int = 120) -> str:
    """A short printable rendering of a reply for log lines."""
    try:
        text = orjson.dumps(reply).decode()
    except TypeError:
        text = type(reply).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_describe(reply: Any) -> dict[str, Any] | None:
    if isinstance(reply, dict) and isinstance(reply.get("schema"), dict):
        schema: dict[str, Any] = reply["schema"]
        return schema
    return None


def _finite(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _text(v: Any, limit: int) -> str | None:
    if not isinstance(v, str):
        return None
    out = _STRIP.sub("", v).strip()[:limit]
    return out or None


def read_metric(raw: Any) -> dict[str, Any] | None:
    """One metric entry, bounded and sanitized; ``None`` when it must be dropped whole."""
    if not isinstance(raw, dict):
        return None
    name, typ = raw.get("name"), raw.get("type")
    if not isinstance(name, str) or not _NAME.match(name) or typ not in _TYPES:
        return None
    out: dict[str, Any] = {"name": name, "type": typ}
    if _finite(raw.get("value")):
        out["value"] = raw["value"]
    labels = raw.get("labels")
    if isinstance(labels, dict) and 0 < len(labels) <= MAX_LABELS and all(
            isinstance(k, str) and _LABEL_KEY.match(k) and isinstance(v, str) for k, v in labels.items()):
        out["labels"] = {k: _STRIP.sub("", v)[:LABEL_VALUE_MAX] for k, v in labels.items()}
    q = raw.get("quantiles")
    if isinstance(q, dict) and 0 < len(q) <= MAX_QUANTILES and all(
            isinstance(k, str) and _quantile_key(k) and _finite(v) for k, v in q.items()):
        out["quantiles"] = dict(q)
    if type(raw.get("estimated")) is bool:
        out["estimated"] = raw["estimated"]
    for key in ("ci_low", "ci_high", "max"):
        if _finite(raw.get(key)):
            out[key] = raw[key]
    for key, limit in _TEXT_LIMITS.items():
        t = _text(raw.get(key), limit)
        if t is not None:
            out[key] = t
    if raw.get("viz") in _VIZ:
        out["viz"] = raw["viz"]
    return out


def _quantile_key(k: str) -> bool:
    try:
        f = float(k)
    except ValueError:
        return False
    return 0.0 <= f <= 1.0 and len(k) <= 8


def read_status(reply: Any, *, desired_version: int | None) -> StatusReport | None:
    """A ``status`` reply -> :class:`StatusReport`; ``None`` when the hook does not support it."""
    if not isinstance(reply, dict):
        return None
    body = reply.get("status")
    if not isinstance(body, dict):
        return None
    v = body.get("settings_version")
    version = v if type(v) is int else None
    raw_settings = body.get("settings")
    settings: dict[str, Any] = raw_settings if isinstance(raw_settings, dict) else {}
    kept: list[dict[str, Any]] = []
    dropped = 0
    raw = body.get("metrics")
    for entry in raw if isinstance(raw, list) else ():
        if len(kept) >= MAX_METRICS:
            dropped += 1
            continue
        m = read_metric(entry)
        if m is None:
            dropped += 1
        else:
            kept.append(m)
    if version is None or desired_version is None:
        drift = "unknown"
    else:
        drift = "in_sync" if version == desired_version else "drift"
    return StatusReport(version, settings, tuple(kept), dropped, drift)
