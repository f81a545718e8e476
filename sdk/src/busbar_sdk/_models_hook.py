"""Typed models of the hook wire: the per-request projection, the three per-request messages and
the gate reply arms.

Messages are frozen pydantic models with a literal ``op`` discriminator. Unknown fields are
ignored (the wire is append-only) except on :class:`RequestProjection` and :class:`Candidate`,
which keep them as extra attributes (declared routing signals are flattened into those objects).
Optional fields are absent on the wire and ``None`` here. Reprs redact prompt text and identity.

Reply arms validate against the wire contract's limits (:mod:`busbar_sdk.wire`, the definition the
kernel's reply parser uses): ``Restrict`` takes 1..64 non-empty tags, ``Reject.status`` is an int in
400..499 and its message at most 300 characters, ``Rewrite`` at least one message. Constructing an
arm out of those limits raises ``pydantic.ValidationError`` (a ``ValueError``); constructing one with
an unknown keyword does too (a typo, not a newer wire). Reading a reply off the wire
(:func:`busbar_sdk.models.parse_hook_reply`) ignores unknown fields, as the kernel does.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from busbar_sdk.wire import (
    DEFAULT_REJECT_MESSAGE,
    DEFAULT_REJECT_STATUS,
    MAX_REJECT_MESSAGE_CHARS,
    MAX_RESTRICT_TAGS,
    REJECT_STATUS_MAX,
    REJECT_STATUS_MIN,
)

__all__ = [
    "DEFAULT_REJECT_MESSAGE",
    "Abstain",
    "BodyMessage",
    "BudgetEntry",
    "Candidate",
    "Context",
    "DecideMessage",
    "HookReply",
    "NotifyMessage",
    "Order",
    "ProjectedMessage",
    "Reject",
    "RequestProjection",
    "Restrict",
    "Rewrite",
    "Stage",
    "TransformMessage",
    "UserIdentity",
]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Open(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class ProjectedMessage(_Wire):
    """One flattened message, ``{role, text}`` (``prompt: ro|rw`` only). ``text`` is redacted in repr."""

    role: str
    text: str = Field(repr=False)


class UserIdentity(_Wire):
    """Caller identity (``user: ro`` only, decide payloads only); never a secret or token."""

    key_id: str | None = None
    key_name: str | None = None
    user: str | None = Field(default=None, repr=False)


class RequestProjection(_Open):
    """``request``: the shape of the request; extra attributes are declared signals.

    Attributes:
        request_id, pool, ingress_protocol: identity of the request and where it came in.
        operation: the non-chat operation (``embeddings``), absent for chat.
        message_count, has_tools, total_chars, stream: shape signals (``total_chars`` is a size
            signal in characters; token counts do not exist pre-dispatch).
        max_tokens: the client's cap, absent when it set none.
        system, messages: prompt text, present only under the ``prompt: ro|rw`` grant.
        user: :class:`UserIdentity`, present only under ``user: ro`` on decide payloads.
        headers: ``{lower-cased name: value}`` of the request headers the instance's settings
            allowlist (``x-busbar-headers``), present only when that list is not empty.
    """

    request_id: str = ""
    pool: str = ""
    ingress_protocol: str = ""
    operation: str | None = None
    message_count: int = 0
    has_tools: bool = False
    total_chars: int = 0
    max_tokens: int | None = None
    stream: bool = False
    system: str | None = Field(default=None, repr=False)
    messages: tuple[ProjectedMessage, ...] | None = Field(default=None, repr=False)
    user: UserIdentity | None = Field(default=None, repr=False)
    headers: dict[str, str] | None = Field(default=None, repr=False)


class Candidate(_Open):
    """One healthy member the request may be served by; extra attributes are declared signals.

    Attributes:
        idx: the member's index, what ``order`` replies rank.
        model, provider, weight: the member.
        context_max, tier, tags: operator labels.
        cost_per_mtok: ``(input_utok + output_utok) / 2`` from the rate card (micro-units/token).
        latency_ms: rolling EWMA in milliseconds.
        available_concurrency: free slots now.
        budget_remaining: remaining budget (micro-units).
        rate_headroom: tightest requests/tokens limit headroom across the key's group chain (0..1).
    """

    idx: int
    model: str = ""
    provider: str = ""
    weight: int = 1
    context_max: int | None = None
    tier: str | None = None
    tags: tuple[str, ...] = ()
    cost_per_mtok: float | None = None
    latency_ms: float | None = None
    available_concurrency: int | None = None
    budget_remaining: int | None = None
    rate_headroom: float | None = None


class BudgetEntry(_Wire):
    """One bucket of the budget chain (``bucket_id`` like ``group:eng@month``); micro-units."""

    bucket_id: str
    budget_group: str | None = None
    spend_micros_at_current_rate: int = 0
    remaining_micros: int | None = None
    window_start: int | str | None = None
    budget_period: str | None = None


class Context(_Wire):
    """``context``: budget state of the request's key, when it carries one."""

    budget_remaining: int | None = None
    budget: tuple[BudgetEntry, ...] = ()


class Stage(_Wire):
    """``stage`` on a notify: which observation point and its own fields only."""

    at: str
    model: str | None = None
    attempt_number: int | None = None
    remaining_candidates: int | None = None
    previous_failure: str | None = None
    outcome: str | None = None
    status: int | None = None


class _PerRequest(_Wire):
    request: RequestProjection = Field(default_factory=RequestProjection)
    candidates: tuple[Candidate, ...] = ()
    context: Context = Field(default_factory=Context)


class DecideMessage(_PerRequest):
    """``{"op": "decide", ...}``: a gate's blocking decision; answer with one reply arm."""

    op: Literal["decide"] = "decide"


class TransformMessage(_PerRequest):
    """``{"op": "transform", ...}``: a rewrite pass; answer reject > rewrite > abstain."""

    op: Literal["transform"] = "transform"


class NotifyMessage(_PerRequest):
    """``{"op": "notify", ..., "stage"?}``: a tap observation; never answered."""

    op: Literal["notify"] = "notify"
    stage: Stage | None = None


# -------------------------------------------------------------------------------- reply arms

class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_wire(self) -> dict[str, Any]:  # pragma: no cover - every arm overrides
        raise NotImplementedError


class Abstain(_Reply):
    """No opinion: ``{}``."""

    def to_wire(self) -> dict[str, Any]:
        return {}


class Reject(_Reply):
    """``{"reject": {"status", "message"}}``: stop the request.

    Attributes:
        status: an HTTP client error, 400..499 (default 403); anything else raises.
        message: 1..300 characters shown to the client (default
            ``busbar_sdk.wire.DEFAULT_REJECT_MESSAGE``); the kernel strips control and bidi characters.
    """

    status: StrictInt = Field(default=DEFAULT_REJECT_STATUS, ge=REJECT_STATUS_MIN, le=REJECT_STATUS_MAX)
    message: str = Field(default=DEFAULT_REJECT_MESSAGE, min_length=1, max_length=MAX_REJECT_MESSAGE_CHARS)

    def to_wire(self) -> dict[str, Any]:
        return {"reject": {"status": self.status, "message": self.message}}


class Restrict(_Reply):
    """``{"restrict": {"tags_any": [...]}}``: only members carrying one of these tags may serve
    (1..64 non-empty tags; more, none or an empty tag raises)."""

    tags_any: tuple[str, ...]

    @field_validator("tags_any")
    @classmethod
    def _non_empty(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or any(not t for t in v):
            raise ValueError("tags_any must hold at least one non-empty tag")
        if len(v) > MAX_RESTRICT_TAGS:
            raise ValueError(f"tags_any holds {len(v)} tags; the limit is {MAX_RESTRICT_TAGS}")
        return v

    def to_wire(self) -> dict[str, Any]:
        return {"restrict": {"tags_any": list(self.tags_any)}}


class Order(_Reply):
    """``{"order": [idx, ...]}``: most preferred first; omitted members are demoted."""

    order: tuple[StrictInt, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"order": list(self.order)}


class BodyMessage(_Reply):
    """A rewritten message in body form ``{role, content}``."""

    role: str
    content: str | tuple[dict[str, Any], ...] = Field(repr=False)


class Rewrite(_Reply):
    """``{"rewrite": {"messages": [...], "tools"?: [...]}}``: replace the body (``prompt: rw``)."""

    messages: tuple[BodyMessage, ...] = Field(min_length=1)
    tools: tuple[dict[str, Any], ...] | None = None

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": [m.model_dump(mode="json") for m in self.messages]}
        if self.tools is not None:
            body["tools"] = list(self.tools)
        return {"rewrite": body}


HookReply = Abstain | Reject | Restrict | Order | Rewrite
