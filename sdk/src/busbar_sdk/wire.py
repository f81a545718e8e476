"""The hook wire contract: op names, field names, reply-arm limits and plugin capability names.

One definition for both sides of the wire. The kernel's projection builder and reply parser import
these constants, and the sdk's typed models (:mod:`busbar_sdk.models`) validate against the same
limits, so a reply the sdk lets a plugin build is a reply the kernel accepts, and the other way
round. Plain constants and frozensets only: this module is imported on the kernel's hot path and
costs nothing beyond its own import (no pydantic).

Unknown fields (decided once for both sides): the wire is append-only, so a reader *ignores*
fields it does not know, at every level (a message, a candidate, a reply, an arm's object). The
sdk's reply-arm classes still refuse unknown *keyword arguments* when plugin code constructs them
(``Reject(stauts=500)`` is a typo, not a newer wire).

Reply arms and their limits (docs/hooks.md "What a gate may answer"):

==============  ===================================================================================
arm             shape and limit
==============  ===================================================================================
abstain         ``{}``, ``{"abstain": true}``, or no arm at all
reject          ``{"reject": {"status"?: 400..499, "message"?: str}}``; any ``reject`` value but
                ``false``/``null`` rejects; a status outside 400..499 (or not an int) becomes
                :data:`DEFAULT_REJECT_STATUS`, a missing/empty message :data:`DEFAULT_REJECT_MESSAGE`;
                the message is sanitized and cut to :data:`MAX_REJECT_MESSAGE_CHARS` characters
restrict        ``{"restrict": {"tags_any": [non-empty str, ...]}}``, 1..:data:`MAX_RESTRICT_TAGS`
                tags; anything else is garbage (the gate's ``on_error`` applies). Every member
                also carries the implicit tag ``model:<its model name>`` (:data:`MODEL_TAG_PREFIX`),
                so a restrict can name members that declare no tags
order           ``{"order": [idx, ...]}``; unknown or repeated idx are dropped
rewrite         ``{"rewrite": {"messages": [{role, content}, ...], "tools"?: [...]}}``, at least one
                message; needs the ``prompt: rw`` grant
==============  ===================================================================================

Precedence when one reply carries several arms: reject > rewrite > restrict/order > abstain.
"""
from __future__ import annotations

import re

__all__ = [
    "ACALL_CAPABILITY",
    "ARM_ABSTAIN",
    "ARM_ORDER",
    "ARM_REJECT",
    "ARM_RESTRICT",
    "ARM_REWRITE",
    "CANDIDATE_FIELDS",
    "CAPABILITY_NAMES",
    "DEFAULT_REJECT_MESSAGE",
    "DEFAULT_REJECT_STATUS",
    "INLINE_CAPABILITY",
    "MANAGEMENT_KEYS",
    "MAX_REJECT_MESSAGE_CHARS",
    "MAX_RESTRICT_TAGS",
    "MODEL_TAG_PREFIX",
    "OP_DECIDE",
    "OP_NOTIFY",
    "OP_TRANSFORM",
    "PER_REQUEST_OPS",
    "REDACTED_REASONING",
    "REJECT_FIELDS",
    "REJECT_STATUS_MAX",
    "REJECT_STATUS_MIN",
    "REQUEST_FIELDS",
    "RESTRICT_FIELDS",
    "RESTRICT_TAGS",
    "REWRITE_FIELDS",
    "STAGE_FIELDS",
    "UNBOUNDED_PERMITS",
    "UNSAFE_TEXT",
    "is_reject",
    "reject_message",
    "reject_status",
]

# ------------------------------------------------------------------------------------------ ops

OP_DECIDE = "decide"
OP_TRANSFORM = "transform"
OP_NOTIFY = "notify"
#: The per-request ops, in the order a request meets them.
PER_REQUEST_OPS = (OP_DECIDE, OP_TRANSFORM, OP_NOTIFY)
#: Top-level keys that make a message a management message (``{"configure": {...}}`` ...).
MANAGEMENT_KEYS = ("configure", "describe", "status")

# ------------------------------------------------------------------------- per-request payload

#: ``request`` fields in wire order (optional ones absent, never null).
REQUEST_FIELDS = ("request_id", "pool", "ingress_protocol", "operation", "message_count", "has_tools", "total_chars",
                  "max_tokens", "stream", "system", "messages", "user", "headers")
#: ``candidates[]`` fields in wire order.
CANDIDATE_FIELDS = ("idx", "model", "provider", "weight", "context_max", "tier", "tags", "cost_per_mtok",
                    "latency_ms", "available_concurrency", "budget_remaining", "rate_headroom")
#: ``stage`` fields of a notify (``at`` always; the rest only where the stage has them).
STAGE_FIELDS = ("at", "model", "attempt_number", "remaining_candidates", "previous_failure", "outcome",
                "status")
#: Text standing in for a redacted reasoning block in a projected message.
REDACTED_REASONING = "[busbar:redacted_reasoning]"
#: ``available_concurrency`` of a lane without ``max_concurrent`` (a 31-bit ceiling, safe in any
#: JSON parser), minus its in-flight count.
UNBOUNDED_PERMITS = 2**31 - 1

# ---------------------------------------------------------------------------------- reply arms

ARM_ABSTAIN = "abstain"
ARM_REJECT = "reject"
ARM_RESTRICT = "restrict"
ARM_ORDER = "order"
ARM_REWRITE = "rewrite"

#: Fields of the ``reject`` object.
REJECT_FIELDS = ("status", "message")
#: Fields of the ``restrict`` object.
RESTRICT_FIELDS = ("tags_any",)
RESTRICT_TAGS = "tags_any"
#: Fields of the ``rewrite`` object.
REWRITE_FIELDS = ("messages", "tools")

#: A reject status is an HTTP client error: 400..499 inclusive.
REJECT_STATUS_MIN = 400
REJECT_STATUS_MAX = 499
#: What a reject with a missing or out-of-range status answers.
DEFAULT_REJECT_STATUS = 403
#: What a reject with a missing or empty message says.
DEFAULT_REJECT_MESSAGE = "Request rejected by the routing policy."
#: Longest reject message relayed to the client, in characters (after sanitizing).
MAX_REJECT_MESSAGE_CHARS = 300
#: Most tags one ``restrict`` arm may carry.
MAX_RESTRICT_TAGS = 64
#: Every pool member carries the implicit restrict tag ``MODEL_TAG_PREFIX + <its model name>``.
MODEL_TAG_PREFIX = "model:"


def reject_status(value: object) -> int:
    """The status a ``reject`` arm answers: ``value`` when it is an ``int`` (not a bool) in
    400..499, else :data:`DEFAULT_REJECT_STATUS` (fail-closed: a malformed status still rejects)."""
    if type(value) is int and REJECT_STATUS_MIN <= value <= REJECT_STATUS_MAX:
        return value
    return DEFAULT_REJECT_STATUS


#: Characters stripped from any plugin-supplied text shown to a client or an operator: controls,
#: bidi overrides, zero-width characters, line/paragraph separators, BOM.
UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def reject_message(value: object) -> str:
    """The text a ``reject`` arm answers: ``value`` with control, bidi, zero-width and line/paragraph
    separator characters stripped, trimmed, cut to :data:`MAX_REJECT_MESSAGE_CHARS`; when that leaves
    nothing (or ``value`` is not a ``str``), :data:`DEFAULT_REJECT_MESSAGE`."""
    if not isinstance(value, str):
        return DEFAULT_REJECT_MESSAGE
    out = UNSAFE_TEXT.sub("", value).strip()[:MAX_REJECT_MESSAGE_CHARS]
    return out or DEFAULT_REJECT_MESSAGE


def is_reject(value: object) -> bool:
    """Does a reply's ``reject`` member reject? Every value but ``None`` (absent/null) and ``False``
    does: a malformed reject still rejects, with the defaults."""
    return value is not None and value is not False


# ------------------------------------------------------------------------ plugin capabilities

#: ``busbar_call.busbar_inline = True``: the plugin's ``busbar_call`` is CPU-only and bounded, so the
#: kernel may call it on the event loop (no worker thread). See ``busbar_sdk.hookspec.busbar_inline``.
INLINE_CAPABILITY = "busbar_inline"
#: ``busbar_call.busbar_acall = async def (handle, payload) -> dict``: an async twin the kernel awaits
#: on the event loop for decide/transform. See ``busbar_sdk.hookspec.busbar_acall``.
ACALL_CAPABILITY = "busbar_acall"
#: Every capability attribute a plugin's ``busbar_call`` may carry.
CAPABILITY_NAMES = (INLINE_CAPABILITY, ACALL_CAPABILITY)
