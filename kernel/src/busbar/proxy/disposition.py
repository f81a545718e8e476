"""Disposition: classify an upstream failure into the class that decides breaker and failover.

Stage 1 (``classify``): the provider ``error_map`` (JSON code or error type; deployment entries
merged over the catalog) wins, then the context-length wordings of ``busbar.proto.context_length``
(400/413 only), then the HTTP status: 401/403 auth, 408 timeout, 409 overloaded (retryable conflict), 429 rate_limit,
529 overloaded, other 5xx server_error, any other 4xx client_error. A ``context_length``
mapping is suppressed on any 5xx (it cannot mask an outage).

Stage 2 (``effect``): rate_limit/overloaded/server_error/timeout/network -> ``TRANSIENT``
(penalize the cell, fail over); auth/billing -> ``HARD_DOWN`` (sticky lane cooldown, fail over);
client_error -> ``CLIENT`` (relay, no penalty, no failover); context_length -> ``CONTEXT``
(no penalty, fail over to a larger ``context_max``).

Source: docs/reliability.md#dispositions (Disposition by error class); cases C018, C021.
"""
from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

from busbar.proto.base import Disposition, UpstreamErrorInfo
from busbar.proto.context_length import says_context_length

TRANSIENT, HARD_DOWN, CLIENT, CONTEXT = "transient_upstream", "hard_down", "client_error", "context_length"

D = Disposition
_EFFECT = {
    D.RATE_LIMIT: TRANSIENT, D.OVERLOADED: TRANSIENT, D.SERVER_ERROR: TRANSIENT, D.TIMEOUT: TRANSIENT,
    D.NETWORK: TRANSIENT, D.AUTH: HARD_DOWN, D.BILLING: HARD_DOWN, D.CLIENT_ERROR: CLIENT,
    D.CONTEXT_LENGTH: CONTEXT,
}
assert set(_EFFECT) == set(D.CLASSES), "every disposition class has an effect"


def classify(status: int, info: UpstreamErrorInfo | None, error_map: dict[str, str]) -> str:
    """Return the disposition class (one of the nine in docs/reliability.md#dispositions) for a non-2xx upstream
    answer."""
    cls = None
    if info is not None and error_map:
        for key in (info.code, info.type):
            if key is not None and key in error_map:
                cls = error_map[key]
                break
    if (cls is None and status in (400, 413) and info is not None
            and says_context_length(info.code, info.type, info.message)):
        cls = "context_length"
    if cls == "context_length" and status >= 500:
        cls = None
    if cls is not None:
        return cls
    if status in (401, 403):
        return "auth"
    if status == 408:
        return "timeout"
    if status == 429:
        return "rate_limit"
    if status in (409, 529):
        return "overloaded"
    if status >= 500:
        return "server_error"
    return "client_error"


def effect(cls: str) -> str:
    """Stage 2: TRANSIENT | HARD_DOWN | CLIENT | CONTEXT for a disposition class."""
    return _EFFECT[cls]


def parse_retry_after(value: str | None, cap_secs: float) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or HTTP date), capped; ``None`` when absent/invalid."""
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(value)
    except ValueError:
        try:
            secs = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if secs != secs or secs <= 0:
        return None
    return min(secs, cap_secs)
