"""Typed models of every wire message and reply arm, and the op discriminator.

Re-exports :mod:`busbar_sdk._models_hook`, :mod:`busbar_sdk._models_mgmt` and
:mod:`busbar_sdk._models_kinds`; adds :func:`message_op`, :func:`parse_hook_message` and
:func:`parse_hook_reply`.

Example::

    from busbar_sdk.models import parse_hook_message, Order

    msg = parse_hook_message({"op": "decide", "request": {"pool": "chat"}, "candidates": [{"idx": 0}]})
    reply = Order(order=[c.idx for c in msg.candidates]).to_wire()   # {"order": [0]}

Source: docs/hooks.md#what-a-hook-receives (message discrimination, evolvability).
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from busbar_sdk._errors import PayloadError
from busbar_sdk._models_hook import (
    Abstain,
    BodyMessage,
    BudgetEntry,
    Candidate,
    Context,
    DecideMessage,
    HookReply,
    NotifyMessage,
    Order,
    ProjectedMessage,
    Reject,
    RequestProjection,
    Restrict,
    Rewrite,
    Stage,
    TransformMessage,
    UserIdentity,
)
from busbar_sdk._models_kinds import (
    AuthenticateMessage,
    AuthPass,
    AuthReject,
    Identity,
    NameMessage,
    ResolveMessage,
    SecretFailure,
    SecretValue,
    StoreFailure,
    StoreMessage,
    StoreResult,
)
from busbar_sdk._models_mgmt import (
    METRIC_NAME_PATTERN,
    ConfigureAck,
    ConfigureBody,
    ConfigureMessage,
    DescribeMessage,
    DescribeReply,
    Metric,
    StatusMessage,
    StatusReply,
)
from busbar_sdk.wire import (
    ARM_ABSTAIN,
    ARM_ORDER,
    ARM_REJECT,
    ARM_RESTRICT,
    ARM_REWRITE,
    DEFAULT_REJECT_MESSAGE,
    MANAGEMENT_KEYS,
    MAX_RESTRICT_TAGS,
    RESTRICT_TAGS,
    REWRITE_FIELDS,
    is_reject,
    reject_message,
    reject_status,
)

__all__ = [
    "DEFAULT_REJECT_MESSAGE",
    "MANAGEMENT_KEYS",
    "METRIC_NAME_PATTERN",
    "Abstain",
    "AuthPass",
    "AuthReject",
    "AuthenticateMessage",
    "BodyMessage",
    "BudgetEntry",
    "Candidate",
    "ConfigureAck",
    "ConfigureBody",
    "ConfigureMessage",
    "Context",
    "DecideMessage",
    "DescribeMessage",
    "DescribeReply",
    "HookMessage",
    "HookReply",
    "Identity",
    "Metric",
    "NameMessage",
    "NotifyMessage",
    "Order",
    "ProjectedMessage",
    "Reject",
    "RequestProjection",
    "ResolveMessage",
    "Restrict",
    "Rewrite",
    "SecretFailure",
    "SecretValue",
    "Stage",
    "StatusMessage",
    "StatusReply",
    "StoreFailure",
    "StoreMessage",
    "StoreResult",
    "TransformMessage",
    "UserIdentity",
    "message_op",
    "parse_hook_message",
    "parse_hook_reply",
]

HookMessage = (DecideMessage | TransformMessage | NotifyMessage | ConfigureMessage | DescribeMessage
               | StatusMessage)


_PER_REQUEST: dict[str, type[DecideMessage | TransformMessage | NotifyMessage]] = {
    "decide": DecideMessage, "transform": TransformMessage, "notify": NotifyMessage}
_MANAGEMENT: dict[str, type[ConfigureMessage | DescribeMessage | StatusMessage]] = {
    "configure": ConfigureMessage, "describe": DescribeMessage, "status": StatusMessage}


def message_op(payload: dict[str, Any]) -> str:
    """The message kind: ``payload["op"]`` when it is a string, else the first management key
    present (``configure``/``describe``/``status``), else ``""`` (not for me: answer ``{}``)."""
    op = payload.get("op")
    if type(op) is str:
        return op
    for key in MANAGEMENT_KEYS:
        if key in payload:
            return key
    return ""


def parse_hook_message(payload: dict[str, Any]) -> HookMessage | None:
    """Parse a hook message into its model; ``None`` for an unknown op (answer ``{}``).

    Raises:
        PayloadError: a known op whose members do not match its model.
    """
    op = message_op(payload)
    model = _PER_REQUEST.get(op) or _MANAGEMENT.get(op)
    if model is None:
        return None
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PayloadError(f"{op} message: {where}: {first['msg']}") from None


def parse_hook_reply(reply: Any) -> HookReply:
    """Read a per-request reply dict as the kernel's reply parser reads it (docs/hooks.md "What a
    gate may answer"; limits from :mod:`busbar_sdk.wire`).

    Precedence: reject > rewrite > abstain > restrict > order. Any ``reject`` value but
    ``false``/``null`` rejects, a malformed one with the defaults (status outside 400..499 -> 403,
    message sanitized, empty -> the default). ``order`` keeps the int entries, first occurrence
    only; empty = abstain. A reply carrying both ``restrict`` and ``order`` reads as its
    :class:`Restrict` (the kernel applies both). Unknown fields are ignored at every level.

    Raises:
        PayloadError: a non-reject arm that the kernel would treat as garbage (the gate's
            ``on_error`` applies): a reply that is not a dict, ``restrict`` without 1..64 non-empty
            string tags, ``order`` not a list, a ``rewrite`` without messages.
    """
    if type(reply) is not dict:
        raise PayloadError(f"malformed reply: a {type(reply).__name__}, not a JSON object")
    if is_reject(reply.get(ARM_REJECT)):
        body = reply[ARM_REJECT] if isinstance(reply[ARM_REJECT], dict) else {}
        return Reject(status=reject_status(body.get("status")), message=reject_message(body.get("message")))
    try:
        raw = reply.get(ARM_REWRITE)
        if raw is not None:
            return Rewrite.model_validate(_rewrite_fields(raw))
        if reply.get(ARM_ABSTAIN) is True:
            return Abstain()
        raw = reply.get(ARM_RESTRICT)
        if raw is not None:
            tags = raw.get(RESTRICT_TAGS) if isinstance(raw, dict) else None
            if type(tags) is not list or not all(type(t) is str for t in tags):
                raise PayloadError(f"malformed reply: restrict must be {{\"tags_any\": [tag, ...]}} with "
                                   f"1..{MAX_RESTRICT_TAGS} non-empty string tags")
            return Restrict(tags_any=tuple(tags))
        raw = reply.get(ARM_ORDER)
        if raw is not None:
            if type(raw) is not list:
                raise PayloadError(f"malformed reply: order is {type(raw).__name__}, not a list of candidate idx")
            order = tuple(dict.fromkeys(i for i in raw if type(i) is int))
            return Order(order=order) if order else Abstain()
    except ValidationError as exc:
        raise PayloadError(f"malformed reply: {exc.errors()[0]['msg']}") from None
    return Abstain()


def _rewrite_fields(raw: Any) -> Any:
    """The known fields of a ``rewrite`` object (and of each of its messages); the rest is ignored."""
    if not isinstance(raw, dict):
        return raw
    out = {k: raw[k] for k in REWRITE_FIELDS if k in raw and raw[k] is not None}
    msgs = out.get("messages")
    if type(msgs) is list:
        out["messages"] = [{k: m[k] for k in ("role", "content") if k in m} if isinstance(m, dict) else m
                           for m in msgs]
    return out
