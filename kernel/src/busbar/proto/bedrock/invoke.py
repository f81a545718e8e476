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

Source: ORIGINAL.md §2.2 ("contains ``/model/…/invoke`` -> bedrock", invoke multiplexed by
body), §2.3 "Bedrock"; AWS InvokeModelWithResponseStream (``PayloadPart.bytes``).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from busbar.ir.model import (
    IrRequest,
    IrResponse,
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
from busbar.proto.base import UpstreamErrorInfo
from busbar.proto.bedrock import errors, sigv4
from busbar.proto.bedrock.dialect import EVENTSTREAM, USER_AGENT, model_path
from busbar.proto.bedrock.eventstream import EventStreamDecoder, Headers, encode_event, split_eventstream
from busbar.proto.bedrock.stream_decoder import _message_of
from busbar.proto.decoder import FrameDecoder, MalformedFrame

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

    def _on_frame(self, frame: tuple[Headers, bytes], out: list[StreamEvent]) -> None:
        headers, payload = frame
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


class BedrockInvokeDialect:
    """Anthropic-on-Bedrock invoke: ``name = "bedrock-invoke"``; ``max_tokens`` required (Claude)."""

    name = "bedrock-invoke"
    requires_max_tokens = True

    def read_request(self, body: dict[str, Any]) -> IrRequest:
        """Invoke body (Anthropic Messages + ``anthropic_version``, no model) -> IR."""
        return anthropic_request.read_request(body)

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
        """IR response -> the Anthropic ``message`` body Bedrock's invoke returns."""
        return anthropic_response.write_response(resp, model, req)

    def stream_encoder(self, model: str, req: IrRequest) -> InvokeStreamEncoder:
        """An encoder of chunk messages for an invoke-with-response-stream client."""
        return InvokeStreamEncoder(model, req)

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """Bedrock's error envelope (``x-amzn-errortype``), as for Converse."""
        return errors.error_response(status, kind, message)

    def write_request(self, req: IrRequest, upstream_model: str) -> dict[str, Any]:
        """IR -> invoke body: the Anthropic body without ``model``/``stream``, with ``anthropic_version``."""
        body = anthropic_writer.write_request(req, upstream_model)
        body.pop("model", None)
        body.pop("stream", None)
        body["anthropic_version"] = ANTHROPIC_VERSION
        return body

    def read_response(self, body: dict[str, Any]) -> IrResponse:
        """Invoke answer (an Anthropic ``message``) -> IR."""
        return anthropic_response.read_response(body)

    def stream_decoder(self) -> InvokeStreamDecoder:
        """A decoder of invoke-with-response-stream chunks."""
        return InvokeStreamDecoder()

    def read_error(self, status: int, body: bytes, headers: Any = None) -> UpstreamErrorInfo:
        """Bedrock error body/headers -> code/message (see ``errors.read_error``)."""
        return errors.read_error(status, body, headers)

    def egress_request(
        self,
        provider: Any,
        upstream_model: str,
        stream: bool,
        body: bytes,
        auth_headers: dict[str, str] | None,
    ) -> tuple[str, dict[str, str], bytes]:
        """``(URL, headers, body)`` for ``/model/{id}/invoke`` or ``/invoke-with-response-stream``."""
        verb = "invoke-with-response-stream" if stream else "invoke"
        url = provider.base_url + model_path(upstream_model, verb)
        headers = {
            "content-type": "application/json",
            "accept": EVENTSTREAM if stream else "application/json",
            "accept-encoding": "identity",
        }
        extra = getattr(provider, "extra_headers", None)
        if extra:
            headers.update(extra)
        if auth_headers is not None:
            headers.update(auth_headers)
        else:
            headers = sigv4.sign(url, body, headers, provider.api_key)
        headers["user-agent"] = USER_AGENT
        return url, headers, body


DIALECT = BedrockInvokeDialect()
"""The adapter singleton (``name = "bedrock-invoke"``)."""
