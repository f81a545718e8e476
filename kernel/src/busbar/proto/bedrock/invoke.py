"""``bedrock-invoke``: Anthropic Messages on Bedrock's ``/model/{id}/invoke[-with-response-stream]``.

A Dialect-compatible adapter, not a seventh protocol: the body is an Anthropic Messages body
with ``anthropic_version`` (``bedrock-2023-05-31``) and no ``model`` (the model id is in the
URL), so reading and writing reuse ``busbar.proto.anthropic``. What differs is the framing and
the envelopes:

- Non-stream answers are the Anthropic ``message`` JSON as is.
- ``invoke-with-response-stream`` answers are eventstream messages with ``:event-type chunk``
  and payload ``{"bytes": base64(<one Anthropic stream event as JSON>)}``; the ``message_stop``
  event carries ``amazon-bedrock-invocationMetrics`` (input/output token counts, latencies) as
  Bedrock adds it. Keep-alive is ``b""`` (no Anthropic ``ping`` is forwarded; it has no chunk
  form worth sending).
- Errors are Bedrock's (``errors``): ``{"message"}`` + ``x-amzn-errortype``; mid-stream, an
  exception message (``throttlingException`` … ), never an Anthropic ``event: error``.

Ingress: ``DIALECT.read_request(body)`` (``anthropic_version`` lands in ``extra``, kept for a
same-protocol hop); the proxy sets ``ir.model``/``ir.stream`` from the route. Egress:
``write_request`` drops ``model``/``stream`` and sets ``anthropic_version``; ``egress_request``
builds the URL and signs it (SigV4, like Converse).

Source: docs/protocols/bedrock.md#streaming-binary-eventstream; AWS InvokeModelWithResponseStream
(``PayloadPart.bytes``).
"""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import orjson

from busbar.ir.model import (
    IrRequest,
    MessageDelta,
    MessageStart,
    MessageStop,
    StreamError,
    StreamEvent,
    Usage,
)
from busbar.proto.anthropic import request as anthropic_request
from busbar.proto.anthropic import request_writer as anthropic_writer
from busbar.proto.anthropic import response as anthropic_response
from busbar.proto.anthropic.stream_decoder import AnthropicStreamDecoder
from busbar.proto.anthropic.stream_encoder import AnthropicStreamEncoder
from busbar.proto.bedrock import errors
from busbar.proto.bedrock.dialect import EVENTSTREAM, model_path, signed_egress
from busbar.proto.bedrock.eventstream import EventStreamDecoder, Headers, encode_event, split_eventstream
from busbar.proto.bedrock.stream_decoder import _message_of
from busbar.proto.decoder import FrameDecoder, MalformedFrame
from busbar.proto.dialect import ModularDialect

ANTHROPIC_VERSION = "bedrock-2023-05-31"
"""The ``anthropic_version`` Bedrock requires in an invoke body."""


def chunk_event(event_json: bytes) -> bytes:
    """One ``:event-type chunk`` message carrying ``{"bytes": base64(event_json)}``."""
    return encode_event("chunk", b'{"bytes":"' + base64.b64encode(event_json) + b'"}')


class InvokeStreamEncoder:
    """IR events -> invoke-with-response-stream chunk messages (an Anthropic stream inside)."""

    content_type = EVENTSTREAM

    __slots__ = ("_done", "_inner", "_usage")

    def __init__(self, model: str, req: IrRequest):
        self._inner = AnthropicStreamEncoder(model, req)
        self._usage = Usage()
        self._done = False

    def encode(self, event: StreamEvent) -> bytes:
        """Bytes for one IR event: one chunk message per Anthropic event it produces."""
        if self._done:
            return b""
        if isinstance(event, StreamError):
            self._done = True
            return errors.exception_frame(event.kind, event.message)
        if isinstance(event, (MessageStart, MessageDelta)):
            self._usage.merge(event.usage)
        sse = self._inner.encode(event)
        if not sse:
            return b""
        out = []
        for frame in sse.split(b"\n\n"):
            i = frame.find(b"\ndata: ")
            if i < 0:
                continue
            data = frame[i + 7 :]
            if data.startswith(b'{"type":"message_stop"'):
                self._done = True
                u = self._usage
                metrics = {
                    "inputTokenCount": u.input_tokens,
                    "outputTokenCount": u.output_tokens,
                    "invocationLatency": 0,
                    "firstByteLatency": 0,
                }
                if u.cache_read_tokens:
                    metrics["cacheReadInputTokenCount"] = u.cache_read_tokens
                if u.cache_write_tokens:
                    metrics["cacheWriteInputTokenCount"] = u.cache_write_tokens
                data = orjson.dumps({"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics})
            out.append(chunk_event(data))
        return b"".join(out)

    def keepalive(self) -> bytes:
        """``b""``: eventstream has no comment frame."""
        return b""


class InvokeStreamDecoder(FrameDecoder):
    """invoke-with-response-stream chunk messages -> IR events (via the Anthropic decoder)."""

    __slots__ = ("_es", "_inner")

    def __init__(self) -> None:
        super().__init__()
        self._es = EventStreamDecoder()
        self._inner = AnthropicStreamDecoder()

    def _split(self, chunk: bytes) -> list[tuple[Headers, bytes]]:
        return split_eventstream(self._es, chunk)

    def _frame(self, headers: Headers, payload: bytes, out: list[StreamEvent]) -> None:
        mtype = headers.get(":message-type", "event")
        if mtype != "event":
            exc = str(headers.get(":exception-type") or headers.get(":error-code") or "")
            msg = _message_of(payload) or str(headers.get(":error-message") or exc or "upstream error")
            self._upstream_error(errors.kind_of(exc), msg, out)
            return
        try:
            raw = base64.b64decode(orjson.loads(payload)["bytes"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise MalformedFrame("upstream sent a malformed chunk") from e
        events = self._inner.feed(b"data: " + raw + b"\n\n")
        out += events
        if any(isinstance(e, (StreamError, MessageStop)) for e in events):
            self._done = True


def write_invoke_request(req: IrRequest, upstream_model: str) -> dict[str, Any]:
    """IR -> invoke body: the Anthropic body without ``model``/``stream``, with ``anthropic_version``."""
    body = anthropic_writer.write_request(req, upstream_model)
    body.pop("model", None)
    body.pop("stream", None)
    body["anthropic_version"] = ANTHROPIC_VERSION
    return body


def egress_request(provider: Any, upstream_model: str, stream: bool, body: bytes,
                   auth_headers: dict[str, str] | None) -> tuple[str, dict[str, str], bytes]:
    """``(URL, headers, body)`` for ``/model/{id}/invoke`` or ``/invoke-with-response-stream``
    (headers and signing as for Converse, ``busbar.proto.bedrock.dialect.signed_egress``)."""
    verb = "invoke-with-response-stream" if stream else "invoke"
    return signed_egress(provider, provider.base_url + model_path(upstream_model, verb), stream, body, auth_headers)


DIALECT = ModularDialect(
    "bedrock-invoke", requires_max_tokens=True, request=anthropic_request,
    request_writer=SimpleNamespace(write_request=write_invoke_request), response=anthropic_response,
    errors=errors, decoder=InvokeStreamDecoder, encoder=InvokeStreamEncoder, egress=egress_request,
    error_headers=True,
)
"""The adapter singleton (``name = "bedrock-invoke"``; ``max_tokens`` required, as for Claude):
Anthropic bodies both ways, Bedrock's error envelope (``x-amzn-errortype``)."""
