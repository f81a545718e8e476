"""The intermediate representation (IR): a superset of the six wire protocols.

Every cross-protocol hop is ``ingress reader -> IR -> egress writer`` (and back for
responses). The IR is a superset, not an intersection (the original's ADR-0005): a
concept that exists in any one of anthropic, openai, responses, gemini, bedrock or
cohere has a home here, so that a field one dialect models survives a hop through a
dialect that does not, wherever the target can carry it.

Shapes (all plain slotted dataclasses, cheap to build on the hot path):

- ``IrRequest``: ``system`` (list of blocks), ``messages`` (list of ``IrMessage``),
  ``tools`` (list of ``IrTool``), sampling knobs, ``stop`` sequences, ``tool_choice``,
  ``reasoning`` ask, ``stream``, ``user``, plus ``extra`` (unmodelled source fields; cleared
  before a foreign writer sees them — leak guard) and ``dropped`` (names of source-only
  fields a writer could not carry, surfaced to operators).
- Blocks (``IrBlock`` union): ``TextBlock``, ``ThinkingBlock`` (incl. redacted, opaque),
  ``ToolUseBlock``, ``ToolResultBlock``, ``ImageBlock``, ``DocumentBlock``. Each carries an
  optional ``cache_control`` marker (prompt caching breakpoint).
- ``IrResponse``: ``id``, ``model``, ``content`` (blocks), ``stop_reason`` (``StopReason``),
  ``stop_sequence``, ``usage`` (``Usage``).
- Streaming: ``MessageStart``, ``BlockStart``, ``BlockDelta``, ``BlockStop``,
  ``MessageDelta``, ``MessageStop``, ``StreamError`` — the Anthropic event grammar, which is
  the richest; flat dialects (OpenAI chunks, Gemini candidates) synthesize block boundaries.

Usage is kept Anthropic-style: ``input_tokens`` EXCLUDES cache reads and writes;
``cache_read_tokens`` and ``cache_write_tokens`` are separate. OpenAI's ``prompt_tokens`` is
therefore ``input + cache_read + cache_write`` and ``cached_tokens`` is ``cache_read`` only.

Source: docs/config-at-a-glance.md#pools (cross-protocol translation)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Union


class StopReason(str, Enum):
    """Normalized stop reasons; every writer maps each member to a valid value of its enum."""

    END_TURN = "end_turn"
    STOP_SEQUENCE = "stop_sequence"
    MAX_TOKENS = "max_tokens"
    TOOL_USE = "tool_use"
    SAFETY = "safety"          # content filter / guardrail
    REFUSAL = "refusal"
    PAUSE_TURN = "pause_turn"
    ERROR = "error"
    OTHER = "other"


# ---------------------------------------------------------------- blocks


@dataclass(slots=True)
class TextBlock:
    text: str
    cache_control: dict | None = None
    citations: list | None = None
    type: str = "text"


@dataclass(slots=True)
class ThinkingBlock:
    """Reasoning content. ``redacted`` blocks carry ``data`` opaquely and are never shown to hooks."""

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    data: str | None = None          # opaque payload of a redacted block
    cache_control: dict | None = None
    type: str = "thinking"


@dataclass(slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: Any = field(default_factory=dict)   # parsed JSON (normally an object)
    cache_control: dict | None = None
    thought_signature: str | None = None       # Gemini thoughtSignature carried across hops
    type: str = "tool_use"


@dataclass(slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: list[IrBlock] = field(default_factory=list)   # text/image blocks
    is_error: bool = False
    name: str | None = None      # Gemini functionResponse needs the function name
    cache_control: dict | None = None
    type: str = "tool_result"


@dataclass(slots=True)
class ImageBlock:
    """An image. ``source`` is ``"base64"`` (with ``media_type`` + ``data``) or ``"url"`` (``url``).

    A ``data:`` URI arriving as a URL is split into base64 by readers (case C015).
    """

    source: str                  # "base64" | "url"
    media_type: str | None = None
    data: str | None = None      # base64 payload (standard alphabet)
    url: str | None = None
    detail: str | None = None    # OpenAI image_url.detail
    cache_control: dict | None = None
    type: str = "image"


@dataclass(slots=True)
class DocumentBlock:
    """A non-image file part (PDF, audio, plain text): kept, never silently dropped (case C040)."""

    media_type: str
    data: str | None = None      # base64
    url: str | None = None
    name: str | None = None
    cache_control: dict | None = None
    type: str = "document"


IrBlock = Union[TextBlock, ThinkingBlock, ToolUseBlock, ToolResultBlock, ImageBlock, DocumentBlock]


@dataclass(slots=True)
class IrMessage:
    role: str                    # "user" | "assistant"
    content: list[IrBlock]


@dataclass(slots=True)
class IrTool:
    name: str
    description: str | None = None
    input_schema: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    cache_control: dict | None = None


@dataclass(slots=True)
class ToolChoice:
    """``mode``: ``auto`` | ``none`` | ``required`` (any tool) | ``tool`` (the named one)."""

    mode: str = "auto"
    name: str | None = None


@dataclass(slots=True)
class ReasoningAsk:
    """A reasoning/thinking request: either an effort word or a token budget (or both after conversion).

    ``budget_tokens == -1`` is Gemini's dynamic thinking. Source: docs/config-at-a-glance.md#models.
    """

    effort: str | None = None          # minimal | low | medium | high
    budget_tokens: int | None = None
    include_thoughts: bool | None = None


@dataclass(slots=True)
class IrRequest:
    messages: list[IrMessage] = field(default_factory=list)
    system: list[IrBlock] = field(default_factory=list)
    tools: list[IrTool] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    reasoning: ReasoningAsk | None = None
    response_format: dict | None = None
    user: str | None = None
    stream: bool = False
    include_usage: bool = False        # OpenAI stream_options.include_usage asked by the client
    model: str | None = None           # what the client named (pool/model)
    extra: dict = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- responses


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0              # excludes cache reads/writes
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0          # informational (already inside output_tokens)

    @property
    def prompt_total(self) -> int:
        """All prompt-side tokens (OpenAI ``prompt_tokens``): input + cache reads + cache writes."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def merge(self, other: Usage) -> None:
        """Overlay the non-zero fields of ``other`` (streams report usage piecemeal)."""
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                     "reasoning_tokens"):
            v = getattr(other, name)
            if v:
                setattr(self, name, v)


@dataclass(slots=True)
class IrResponse:
    id: str | None = None
    model: str | None = None
    content: list[IrBlock] = field(default_factory=list)
    stop_reason: StopReason | None = StopReason.END_TURN
    stop_sequence: str | None = None
    usage: Usage = field(default_factory=Usage)
    created: int | None = None


# ---------------------------------------------------------------- stream events


@dataclass(slots=True)
class MessageStart:
    id: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)


@dataclass(slots=True)
class BlockStart:
    """``block`` is a fresh block: TextBlock(""), ThinkingBlock(), ToolUseBlock(id, name, input={})."""

    index: int
    block: IrBlock


@dataclass(slots=True)
class BlockDelta:
    """``kind``: ``text`` | ``thinking`` | ``input_json`` (a raw JSON fragment) | ``signature``."""

    index: int
    kind: str
    value: str


@dataclass(slots=True)
class BlockStop:
    index: int


@dataclass(slots=True)
class MessageDelta:
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None
    usage: Usage = field(default_factory=Usage)


@dataclass(slots=True)
class MessageStop:
    pass


@dataclass(slots=True)
class StreamError:
    """An in-band failure: ``kind`` is a canonical error kind (see ``busbar.proto.base.ErrorKind``).

    ``upstream_frame``: True when the provider said so in its own error event (already relayed
    verbatim to a same-protocol client); False when the gateway detected the fault (bytes the
    protocol does not allow, a body that ended early) — then every client, same protocol
    included, gets the gateway's in-band error frame. Not part of equality.
    """

    kind: str
    message: str
    upstream_frame: bool = field(default=False, compare=False)


StreamEvent = Union[MessageStart, BlockStart, BlockDelta, BlockStop, MessageDelta, MessageStop, StreamError]
