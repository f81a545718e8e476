"""The seam every mocked protocol implements, and the small shared pieces they use.

One :class:`Dialect` subclass per provider protocol (``openai_chat.py``, ``anthropic.py``; later
responses, gemini, bedrock, cohere). A dialect reads a request body into a neutral
:class:`~.reply.Prompt`, renders a :class:`~.reply.Reply` as a JSON body or as a list of stream
frames, and knows the provider's own error bodies (HTTP and in-band).

What must not live here: routing, fault scheduling or socket handling (``app.py``, ``wire.py``).
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from .fixtures import FixtureStore
from .reply import Prompt, Reply

__all__ = ["Dialect", "ErrorReply", "Rendered", "mint_id", "next_seq", "text_of"]

_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_seq = itertools.count(1)
_PADS: dict[str, str] = {}


def next_seq() -> int:
    """Return the next per-process request number (1, 2, ...)."""
    return next(_seq)


def _pad(salt: str) -> str:
    pad = _PADS.get(salt)
    if pad is None:
        digest = hashlib.blake2b(salt.encode(), digest_size=64).digest()
        pad = _PADS[salt] = "".join(_ALNUM[b % 62] for b in digest)
    return pad


def mint_id(prefix: str, seq: int, length: int, salt: str = "") -> str:
    """Mint a provider-looking id: ``prefix`` + ``length`` (8..64) base-62 characters derived from ``seq``.

    Deterministic for a given (seq, salt) and distinct per seq, e.g. ``mint_id("chatcmpl-", 1, 29)``;
    a fixed per-salt pseudo-random head followed by the scrambled sequence number in base 62.
    """
    n = (seq * 2_654_435_761) % 62**8
    tail = ""
    for _ in range(8):
        n, r = divmod(n, 62)
        tail = _ALNUM[r] + tail
    return prefix + _pad(salt)[: length - 8] + tail


def text_of(content: Any) -> str:
    """Plain text of a message ``content``: a string, or the ``text`` of each block in a list.

    Nested ``content`` (Anthropic ``tool_result`` blocks) and Cohere ``document`` blocks
    (``{"type": "document", "document": {"data": ...}}``) are followed; other blocks add nothing.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
                elif "content" in block:
                    parts.append(text_of(block["content"]))
                elif isinstance(block.get("document"), dict):
                    data = block["document"].get("data")
                    parts.append(data if isinstance(data, str) else "")
        return " ".join(p for p in parts if p)
    return ""


@dataclass(slots=True)
class ErrorReply:
    """An HTTP error answer: status, body bytes (exact), extra headers."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class Rendered:
    """A rendered success answer: ``body`` for JSON, or ``frames`` (one SSE event each) for a stream."""

    content_type: str
    body: bytes | None = None
    frames: list[bytes] | None = None


class Dialect:
    """Base class of a mocked provider protocol.

    Subclasses set :attr:`name` (the script ``match.protocol`` value) and implement every method.
    """

    name: ClassVar[str] = ""
    request_id_header: ClassVar[str] = "x-request-id"

    def __init__(self, fixtures: FixtureStore) -> None:
        self.fixtures = fixtures

    def authorized(self, headers: dict[str, str]) -> bool:
        """True when the request carries the credential header this provider requires."""
        raise NotImplementedError

    def auth_error(self) -> ErrorReply:
        """The provider's 401 answer for a missing credential."""
        return self.error_reply(401)

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        """Validate a request body as the provider does and read it into a :class:`Prompt`.

        Returns:
            The prompt, or the provider's 400 answer (exact body) for an invalid request.
        """
        raise NotImplementedError

    def bad_json(self) -> ErrorReply:
        """The provider's 400 answer for a body that is not a JSON object."""
        raise NotImplementedError

    def bind_state(self, body: dict[str, Any], headers: dict[str, str], prompt: Prompt) -> ErrorReply | None:
        """Check request state that belongs to the caller's account (default: none) and note on
        ``prompt.state`` what rendering needs; an :class:`ErrorReply` refuses the request."""
        return None

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        """Render a planned reply as the provider's JSON body, or its stream when ``prompt.stream``."""
        raise NotImplementedError

    def error_reply(self, status: int, message: str | None = None) -> ErrorReply:
        """The provider's error answer for ``status`` (a real capture when one exists).

        Args:
            status: HTTP status, 400-599.
            message: replaces the message text (a synthesized body is then used).
        """
        raise NotImplementedError

    def stream_error_frame(self, error: Any) -> bytes:
        """The provider's in-band error event, written after ``error_after`` frames.

        Args:
            error: None for the provider's default mid-stream error, a string for its message,
                or a dict used verbatim as the event payload.
        """
        raise NotImplementedError

    def sse_frame(self, item: Any) -> bytes:
        """Frame one scripted ``sse`` list item as this provider would put it on the wire.

        Default (OpenAI-style): ``data: <payload>\\n\\n``; strings are sent verbatim as the payload.
        """
        payload = item.encode() if isinstance(item, str) else orjson.dumps(item)
        return b"data: " + payload + b"\n\n"

    def request_id(self, seq: int) -> str:
        """The provider-style request id sent in :attr:`request_id_header`."""
        return mint_id("req_", seq, 24, salt="req")
