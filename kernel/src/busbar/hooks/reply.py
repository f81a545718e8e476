"""Reply normalizers: a gate's raw reply dict -> one typed arm, fail-closed, grants enforced.

Run on the hook's worker thread (never the event loop), right after the plugin returns.

``read_decide(reply, known_idx, grant)`` and ``read_transform(reply, grant, max_bytes)`` return an
arm or raise :class:`ReplyError` (garbage: the gate's ``on_error`` applies):

- abstain: ``{}``, ``{"abstain": true}``, or a reply with no arm (unknown fields are ignored; the
  wire is append-only and ``report`` is reserved).
- reject (:class:`Reject`): any ``reject`` value except ``false``/``null`` rejects, a malformed
  one with the defaults (403, ``DEFAULT_REJECT_MESSAGE``): a mis-typed detail never degrades to
  "route the request". ``status`` must be an int in 400..499, else 403; ``message`` is sanitized
  (control, bidi, zero-width and line/paragraph separators stripped; at most 300 characters).
  Reject wins over every other arm in the same reply.
- restrict (:class:`Arms.restrict`): ``{"tags_any": [non-empty str, ...]}`` (1..64 tags,
  ``busbar_sdk.wire.MAX_RESTRICT_TAGS``).
- order (:class:`Arms.order`): a list; entries that are not the ``idx`` of a candidate sent are
  dropped, duplicates dropped keeping the first; empty = abstain. Restrict and order may come
  together in one reply.
- rewrite (:class:`Rewrite`, transform replies only): ``{"messages": [{role, content}], "tools"?:
  [...]}`` in body form, read through the Anthropic Messages reader into IR (roles user/assistant;
  the system prompt is not rewritable); larger than ``max_bytes`` serialized = garbage.

Grants, the return direction: a ``rewrite`` arm from a hook whose effective prompt grant is not
``rw`` is a violation, treated as garbage (never applied). Transform precedence: reject > rewrite >
abstain; ``restrict``/``order`` are decide-path verbs and are ignored on a transform reply.

The arm names, field names and limits are the wire contract's (:mod:`busbar_sdk.wire`), the one
definition the sdk's reply models validate against too (docs/hooks.md "What a gate may answer").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from busbar_sdk.wire import (
    DEFAULT_REJECT_MESSAGE,
    DEFAULT_REJECT_STATUS,
    MAX_REJECT_MESSAGE_CHARS,
    MAX_RESTRICT_TAGS,
    UNSAFE_TEXT,
    is_reject,
    reject_message,
    reject_status,
)

from busbar.ir.model import IrMessage, IrTool

MAX_MESSAGE_CHARS = MAX_REJECT_MESSAGE_CHARS
MAX_TAGS = MAX_RESTRICT_TAGS
_STRIP = UNSAFE_TEXT

__all__ = [
    "ABSTAIN",
    "DEFAULT_REJECT_MESSAGE",
    "Abstain",
    "Arms",
    "Reject",
    "ReplyError",
    "Rewrite",
    "read_decide",
    "read_reject",
    "read_transform",
    "sanitize",
]


class ReplyError(Exception):
    """A reply that is not a valid arm (``reason``: ``garbage`` or ``grant``)."""

    def __init__(self, message: str, reason: str = "garbage"):
        super().__init__(message)
        self.reason = reason


@dataclass(slots=True)
class Abstain:
    """No opinion; ``note``: the reply's ``explain`` object, when the gate explained itself (set by
    ``HookFacade``; never read for routing)."""

    note: dict[str, Any] | None = None


ABSTAIN = Abstain()


@dataclass(slots=True)
class Reject:
    """Stop the request: ``status`` in 400..499 (or 503 from a fail-closed path), sanitized text."""

    status: int
    message: str


@dataclass(slots=True)
class Arms:
    """Decide-path arms of one reply: ``restrict`` (tags) and/or ``order`` (member indexes)."""

    restrict: frozenset[str] | None = None
    order: tuple[int, ...] | None = None
    note: dict[str, Any] | None = None


@dataclass(slots=True)
class Rewrite:
    """A replacement body: IR ``messages`` and, when sent, ``tools`` (``None`` = keep the client's)."""

    messages: list[IrMessage]
    tools: list[IrTool] | None


def sanitize(text: str) -> str:
    """Strip control, bidi, zero-width and separator characters; trim; at most 300 characters
    (:data:`DEFAULT_REJECT_MESSAGE` when nothing is left)."""
    return reject_message(text)


def read_reject(value: Any) -> Reject:
    """A ``reject`` value (already known not to be false/null) -> :class:`Reject`, fail-closed."""
    if isinstance(value, dict):
        return Reject(reject_status(value.get("status")), reject_message(value.get("message")))
    return Reject(DEFAULT_REJECT_STATUS, DEFAULT_REJECT_MESSAGE)


def _rejects(reply: dict[str, Any]) -> bool:
    return is_reject(reply.get("reject"))


def read_decide(reply: Any, known_idx: frozenset[int], prompt_grant: str) -> Abstain | Reject | Arms:
    """Normalize a ``decide`` reply; see the module docstring. Raises :class:`ReplyError`."""
    if type(reply) is not dict:
        raise ReplyError(f"reply is {type(reply).__name__}, not a JSON object")
    if not reply:
        return ABSTAIN
    if len(reply) == 1:                 # the everyday reply, {"order": [idx, ...]}: no other arm to weigh
        raw = reply.get("order")
        if type(raw) is list:           # _order_of, inlined
            seen: dict[int, None] = {}
            for i in raw:
                if type(i) is int and i in known_idx and i not in seen:
                    seen[i] = None
            return Arms(None, tuple(seen)) if seen else ABSTAIN
    if _rejects(reply):
        return read_reject(reply["reject"])
    if reply.get("rewrite") is not None and prompt_grant != "rw":
        raise ReplyError(f"replied with a rewrite arm but its prompt grant is {prompt_grant!r}; rewrite needs "
                         f"prompt: rw", "grant")
    if reply.get("abstain") is True:
        return ABSTAIN
    restrict = None
    raw = reply.get("restrict")
    if raw is not None:
        restrict = _read_restrict(raw)
    order = None
    raw = reply.get("order")
    if raw is not None:
        if type(raw) is not list:
            raise ReplyError(f"order is {type(raw).__name__}, not a list of candidate idx")
        order = _order_of(raw, known_idx)
    if restrict is None and order is None:
        return ABSTAIN
    return Arms(restrict, order)


def _order_of(raw: list[Any], known_idx: frozenset[int]) -> tuple[int, ...] | None:
    """An ``order`` list -> its known ``idx`` entries, first occurrences in order (``None``: none)."""
    seen: dict[int, None] = {}
    for i in raw:
        if type(i) is int and i in known_idx and i not in seen:
            seen[i] = None
    return tuple(seen) or None


def _read_restrict(raw: Any) -> frozenset[str]:
    tags = raw.get("tags_any") if isinstance(raw, dict) else None
    if type(tags) is not list or not tags or len(tags) > MAX_TAGS:
        raise ReplyError(f"restrict must be {{\"tags_any\": [tag, ...]}} with 1..{MAX_TAGS} tags")
    for t in tags:
        if not isinstance(t, str) or not t:
            raise ReplyError("restrict.tags_any holds a tag that is not a non-empty string")
    return frozenset(tags)


def read_transform(reply: Any, prompt_grant: str, max_bytes: int) -> Abstain | Reject | Rewrite:
    """Normalize a ``transform`` reply: reject > rewrite > abstain. Raises :class:`ReplyError`."""
    if type(reply) is not dict:
        raise ReplyError(f"reply is {type(reply).__name__}, not a JSON object")
    if _rejects(reply):
        return read_reject(reply["reject"])
    raw = reply.get("rewrite")
    if raw is None:
        return ABSTAIN
    if prompt_grant != "rw":
        raise ReplyError(f"replied with a rewrite arm but its prompt grant is {prompt_grant!r}; rewrite needs "
                         f"prompt: rw", "grant")
    return _read_rewrite(raw, max_bytes)


def _read_rewrite(raw: Any, max_bytes: int) -> Rewrite:
    from busbar.proto.anthropic.request import read_request
    from busbar.proto.errors import ProtoError

    if not isinstance(raw, dict):
        raise ReplyError("rewrite must be an object {\"messages\": [...], \"tools\"?: [...]}")
    msgs = raw.get("messages")
    if type(msgs) is not list or not msgs:
        raise ReplyError("rewrite.messages must be a non-empty list of {role, content}")
    tools = raw.get("tools")
    if tools is not None and type(tools) is not list:
        raise ReplyError("rewrite.tools must be a list")
    try:
        size = len(orjson.dumps(raw))
    except TypeError as e:
        raise ReplyError(f"rewrite is not JSON: {e}") from None
    if size > max_bytes:
        raise ReplyError(f"rewrite is {size} bytes; the limit is {max_bytes} (limits.request_body_max_bytes)")
    body: dict[str, Any] = {"messages": msgs}
    if tools:
        body["tools"] = [_anthropic_tool(t) for t in tools]
    try:
        ir = read_request(body)
    except ProtoError as e:
        raise ReplyError(f"rewrite: {e.message}") from None
    return Rewrite(ir.messages, ir.tools if tools is not None else None)


def _anthropic_tool(t: Any) -> Any:
    """Accept an OpenAI-style function tool as well as the Anthropic shape."""
    if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict):
        f = t["function"]
        out = {"name": f.get("name"), "input_schema": f.get("parameters") or {"type": "object", "properties": {}}}
        if f.get("description") is not None:
            out["description"] = f["description"]
        return out
    return t
