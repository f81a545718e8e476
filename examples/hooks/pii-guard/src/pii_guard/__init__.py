"""pii-guard: a ``prompt: ro`` gate that rejects (451) a request carrying an unredacted SSN-like or
card-like number, before it leaves your network.

A ``prompt: ro`` gate that may answer ``reject`` is the PII-screen primitive
(docs/hooks.md#what-a-gate-may-answer): see content, say no. Wire it with ``on_error: reject`` (a security gate: an
unscreened request is worse than none), so a crash, a timeout or a missing grant fails closed with 503 instead of
letting the request through::

    global_hooks:
      - { module: pii-guard, kind: gate, prompt: ro, on_error: reject, timeout_ms: 5 }

What it looks for, in ``request.system`` and every ``request.messages[].text`` (which includes
replayed reasoning text):

* ``ssn``: ``AAA-GG-SSSS`` or ``AAA GG SSSS`` (one separator kind), a valid area (not 000, 666 or
  900-999), group (not 00) and serial (not 0000), not embedded in a longer digit run;
* ``card``: 13 to 19 digits, optionally grouped by single spaces or dashes, passing the Luhn check,
  not all one digit, not embedded in a longer digit run.

Redacted forms (``***-**-6789``, ``XXXX XXXX XXXX 4242``) are not digits and never match. The
rejection message names what was found and where (``message 2``), never the number itself.

A decide or transform without prompt text raises: the gate was wired without ``prompt: ro`` (or the
manifest's needs), so it cannot screen, and ``on_error: reject`` turns that into a 503.

Settings: ``status`` (400-499, default 451), ``detectors`` (default ``["ssn", "card"]``),
``message`` (the rejection text prefix).
"""
from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Any, ClassVar

from busbar_sdk import HookPlugin, Reject, export_plugin
from busbar_sdk.models import (
    ConfigureAck,
    ConfigureMessage,
    DecideMessage,
    Metric,
    StatusReply,
    TransformMessage,
)

__all__ = ["DETECTORS", "PiiGuard", "find_card", "find_ssn", "plugin"]

_SSN = re.compile(r"(?<![\d-])(\d{3})([- ])(\d{2})\2(\d{4})(?![\d-])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_DEFAULT_MESSAGE = "Request blocked by the PII guard"

SETTINGS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pii-guard settings",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "status": {"type": "integer", "minimum": 400, "maximum": 499, "default": 451,
                   "description": "HTTP status of the rejection (451 Unavailable For Legal Reasons)."},
        "detectors": {"type": "array", "items": {"enum": ["ssn", "card"]}, "minItems": 1,
                      "default": ["ssn", "card"], "description": "What to screen for."},
        "message": {"type": "string", "minLength": 1, "maxLength": 200, "default": _DEFAULT_MESSAGE,
                    "description": "Start of the rejection message; the guard appends what it found and where."},
    },
}


def find_ssn(text: str) -> bool:
    """True when ``text`` carries an unredacted, structurally valid SSN-like number."""
    for m in _SSN.finditer(text):
        area, group, serial = m.group(1), m.group(3), m.group(4)
        if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
            continue
        return True
    return False


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def find_card(text: str) -> bool:
    """True when ``text`` carries an unredacted card-like number (13-19 digits, Luhn-valid)."""
    for m in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", m.group())
        if 13 <= len(digits) <= 19 and len(set(digits)) > 1 and _luhn(digits):
            return True
    return False


DETECTORS = {"ssn": (find_ssn, "social security number"), "card": (find_card, "payment card number")}


class PiiGuard(HookPlugin):
    """The gate: ``Reject(451)`` on a hit, abstain otherwise."""

    settings_schema: ClassVar[dict[str, Any] | None] = SETTINGS_SCHEMA

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        self._apply(settings)
        self._lock = threading.Lock()
        self._screened = 0
        self._rejected: Counter[str] = Counter()

    def _apply(self, settings: dict[str, Any]) -> None:
        unknown = sorted(set(settings) - set(SETTINGS_SCHEMA["properties"]))
        if unknown:
            raise ValueError(f"settings.{unknown[0]} is not a pii-guard setting")
        status = settings.get("status", 451)
        if type(status) is not int or not 400 <= status <= 499:
            raise ValueError(f"settings.status must be an integer in 400..499, found {status!r}")
        detectors = settings.get("detectors", ["ssn", "card"])
        if not isinstance(detectors, list) or not detectors or any(d not in DETECTORS for d in detectors):
            raise ValueError(f"settings.detectors must be a non-empty list of {sorted(DETECTORS)}")
        message = settings.get("message", _DEFAULT_MESSAGE)
        if not isinstance(message, str) or not 1 <= len(message) <= 200:
            raise ValueError("settings.message must be a string of 1..200 characters")
        self._status, self._detectors, self._message = status, tuple(dict.fromkeys(detectors)), message

    def decide(self, message: DecideMessage) -> Reject | None:
        return self._screen(message)

    def transform(self, message: TransformMessage) -> Reject | None:
        return self._screen(message)

    def _screen(self, message: DecideMessage | TransformMessage) -> Reject | None:
        req = message.request
        if req.messages is None and req.system is None:
            raise PermissionError("pii-guard received no prompt text: wire it with prompt: ro (and on_error: "
                                  "reject); it cannot screen what it cannot see")
        texts: list[tuple[str, str]] = []
        if req.system:
            texts.append(("the system prompt", req.system))
        texts += [(f"message {i}", m.text) for i, m in enumerate(req.messages or (), start=1)]
        with self._lock:
            self._screened += 1
        for where, text in texts:
            for name in self._detectors:
                found, what = DETECTORS[name]
                if found(text):
                    with self._lock:
                        self._rejected[name] += 1
                    return Reject(status=self._status,
                                  message=f"{self._message}: {where} carries an unredacted {what}; redact it "
                                          f"and retry.")
        return None

    def configure(self, message: ConfigureMessage) -> ConfigureAck:
        self._apply(message.configure.settings)  # raises: no ack, nothing changes
        return super().configure(message)

    def status(self) -> StatusReply:
        with self._lock:
            metrics = [Metric(name="pii_guard_screened_total", type="counter", value=self._screened,
                              help="requests screened")]
            metrics += [Metric(name="pii_guard_rejected_total", type="counter", value=n, labels={"detector": d},
                               help="requests rejected, by detector")
                        for d, n in sorted(self._rejected.items())]
        return StatusReply(settings_version=self.settings_version if self.settings_version is not None else 0,
                           settings=self.settings, metrics=tuple(metrics))


plugin = export_plugin(PiiGuard)
