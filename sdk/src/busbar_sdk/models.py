"""Typed models of every wire message and reply arm, and the op discriminator.

Re-exports :mod:`busbar_sdk._models_hook`, :mod:`busbar_sdk._models_mgmt` and
:mod:`busbar_sdk._models_kinds`; adds :func:`message_op`, :func:`parse_hook_message` and
:func:`parse_hook_reply`.

Example::

    from busbar_sdk.models import parse_hook_message, Order

    msg = parse_hook_message({"op": "decide", "request": {"pool": "chat"}, "candidates": [{"idx": 0}]})
    reply = Order(order=[c.idx for c in msg.candidates]).to_wire()   # {"order": [0]}

Source: seeds 003 "The wire, precisely" (message discrimination, evolvability).
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from busbar_sdk._errors import PayloadError
from busbar_sdk._models_hook import (
    DEFAULT_REJECT_MESSAGE,
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

#: Top-level keys that make a message a management message on the sidecar wire.
MANAGEMENT_KEYS = ("configure", "describe", "status")

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


def parse_hook_reply(reply: dict[str, Any]) -> HookReply:
    """Read a per-request reply dict as its arm, precedence reject > rewrite > restrict > order >
    abstain (as the kernel's normalizers do; a malformed reject still rejects with defaults).

    Raises:
        PayloadError: a non-reject arm that is malformed.
    """
    if "reject" in reply:
        body = reply["reject"] if isinstance(reply["reject"], dict) else {}
        status = body.get("status", 403)
        if type(status) is not int or not 400 <= status <= 499:
            status = 403
        message = body.get("message")
        return Reject(status=status,
                      message=message if isinstance(message, str) and message else DEFAULT_REJECT_MESSAGE)
    try:
        if "rewrite" in reply:
            return Rewrite.model_validate(reply["rewrite"])
        if "restrict" in reply:
            return Restrict.model_validate(reply["restrict"])
        if "order" in reply:
            return Order(order=reply["order"])
    except ValidationError as exc:
        raise PayloadError(f"malformed reply: {exc.errors()[0]['msg']}") from None
    return Abstain()
