"""Audio on the failover walk: transcription/translation uploads and speech (OpenAI lanes only).

``AudioOperation`` is the ``Operation`` (``busbar.proxy.operation``) of the three OpenAI audio
routes; ``kind`` is ``transcriptions``, ``translations`` or ``speech``. A lane whose model declares
``audio`` serves it when its protocol is OpenAI, or Gemini for an upload it can take
(``busbar.proto.ops.audio_gemini``: through ``:generateContent``); others are skipped, no penalty.

- Uploads: ``raw`` is the received multipart body, ``form`` its parts as spans
  (``busbar.proto.ops.audio.parse_form``). ``prepare`` sends views of ``raw`` around the lane's
  wire model (``reframe``): the file is never copied, the upload is held once. A 2xx answer must
  look like a transcription (``upload_verdict``: JSON with ``text``, or non-empty text for
  text/srt/vtt). The lane is asked for a format that reports what it used
  (``busbar.proto.ops.audio_formats.upstream_format``: ``verbose_json`` from a whisper model,
  ``json`` for ``text`` from the others) and the answer is written back in the client's format
  (``render``); otherwise it is relayed as the upstream wrote it, with its content type.
  ``op_usage.audio_seconds``: ``duration`` (or ``usage.seconds``); ``Reply.usage``: a
  ``usage`` of type ``tokens`` (gpt-4o transcription models), priced like chat tokens.
  To a Gemini lane the upload goes as a ``generateContent`` body whose base64 is encoded from views
  of ``raw`` as it is sent (``GeminiUploadBody``); the answer's text is written in the client's
  format, and ``op_usage.audio_seconds`` is its AUDIO tokens / 32.
- Speech: ``binary``: the attempt commits at the upstream's 2xx headers when their content type is
  audio (``speech_verdict``; JSON, HTML or text fails over) and ``stream_reply`` relays the bytes
  chunk by chunk with the upstream's content type (never buffered whole).
  ``op_usage.characters``: the length of ``input``.

Source: docs/beyond-chat.md#audio.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from busbar.ir.model import IrMessage, IrRequest, TextBlock
from busbar.ir.ops import OpUsage
from busbar.proto.ops.audio import (
    SPEECH_INPUT_MAX,
    Form,
    audio_seconds,
    reframe,
    speech_verdict,
    token_usage,
    upload_verdict,
)
from busbar.proto.ops.audio_formats import render, upstream_format
from busbar.proto.ops.audio_gemini import GeminiUploadBody, read_answer, write_answer
from busbar.proto.ops.audio_gemini import dropped as gemini_dropped
from busbar.proto.ops.audio_gemini import unable as gemini_unable
from busbar.proxy.operation import Operation
from busbar.proxy.relay import Reply, StreamAborted
from busbar.proxy.upstream import Body, UpstreamError

if TYPE_CHECKING:
    from busbar.proto.ops.base import OpCodec
    from busbar.proxy.attempt import AttemptSuccess
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.relay import StreamLimits
    from busbar.proxy.runtime import Lane, Provider
    from busbar.proxy.translate import Call
    from busbar.proxy.upstream import UpstreamResponse


class AudioOperation(Operation):
    """One audio request (see the module docstring): ``kind``, the upload's ``form`` and ``raw``
    body and its client ``content_type`` (``None``/empty for speech)."""

    __slots__ = ("kind", "form", "raw", "content_type")

    def __init__(self, kind: str, ingress: OpCodec, req: Any, form: Form | None = None,
                 raw: bytes = b"", content_type: str = ""):
        super().__init__("audio", ingress, req)
        self.kind = kind
        self.form = form
        self.raw = raw
        self.content_type = content_type

    @property
    def binary(self) -> bool:
        return self.kind == "speech"

    def able(self, lane: Lane) -> str | None:
        """As ``Operation.able``; a Gemini lane also needs an upload it can take
        (``busbar.proto.ops.audio_gemini.unable``: no speech, no srt/vtt, a known audio type)."""
        why = super().able(lane)
        if why is None and lane.provider.protocol == "gemini":
            return gemini_unable(self.kind, self.form)
        return why

    def ir_view(self) -> IrRequest:
        """Hooks see the speech ``input`` or the upload's ``prompt`` as one user message."""
        text = self.form.prompt if self.form is not None else str(self.req.get("input", ""))
        return IrRequest(messages=[IrMessage("user", [TextBlock(text)])] if text else [])

    def _set_texts(self, texts: list[str]) -> str | None:
        """Speech: the rewritten ``input`` (checked like the client's). An upload's prompt is a part
        of the multipart body: it is not rewritten (the reason is returned)."""
        if self.form is not None:
            return "an audio upload cannot be rewritten (its prompt is a part of the multipart body)"
        if len(texts[0]) > SPEECH_INPUT_MAX or not texts[0]:
            return f"a rewritten speech input must be 1 to {SPEECH_INPUT_MAX} characters"
        self.req = {**self.req, "input": texts[0]}
        return None

    def body(self, call: Call, lane: Lane) -> tuple[bytes, list[str]]:
        if self.form is not None:                  # re-framed (when needed) or encoded in prepare
            return self.raw, gemini_dropped(self.form) if lane.provider.protocol == "gemini" else []
        return super().body(call, lane)

    async def prepare(self, gw: Gateway, provider: Provider, upstream_model: str,
                      body: Body) -> tuple[str, dict[str, str], Body]:
        """``(url, headers, body)``: ``{base_url}/v1/audio/{kind}``; an upload keeps the client's
        multipart content type (its boundary) and goes as views of the received bytes."""
        from busbar.proto.responses.dialect import egress_headers

        auth = await gw.credentials.headers(provider) if provider.auth is not None else None
        form = self.form
        if provider.protocol == "gemini":          # generateContent, the file base64-encoded as it is sent
            from busbar.proto.gemini.dialect import egress_request as gemini_egress

            assert form is not None                # able() keeps speech off Gemini lanes
            upload = GeminiUploadBody(form, self.raw, self.kind)
            url, headers, _ = gemini_egress(provider, upstream_model, False, b"", auth)
            headers["content-type"] = "application/json"
            headers["content-length"] = str(upload.length)
            return url, headers, upload
        headers = egress_headers(provider, auth)
        url = f"{provider.base_url}/v1/audio/{self.kind}"
        if form is None:
            return url, headers, body
        headers["content-type"] = self.content_type
        chunks, length = reframe(form, self.raw, upstream_model,
                                 upstream_format(form.response_format, upstream_model))
        headers["content-length"] = str(length)
        return url, headers, chunks

    def verdict(self, protocol: str, status: int, headers: Mapping[str, str],
                body: bytes) -> tuple[dict[str, Any] | None, str | None]:
        """An upload's answer: JSON with ``text`` or plain text (``upload_verdict``); from a Gemini
        lane, a ``GenerateContentResponse`` (``candidates``)."""
        if protocol == "gemini":
            return super().verdict(protocol, status, headers, body)
        return upload_verdict(status, headers, body)

    def head_verdict(self, status: int, headers: Mapping[str, str]) -> str | None:
        """Speech commits at the headers: a reason when they do not announce audio."""
        return speech_verdict(status, headers)

    def reply(self, call: Call, lane: Lane, success: AttemptSuccess) -> Reply:
        """An upload's answer relayed as-is with its content type and its audio seconds; a Gemini
        lane's answer written in the client's format, its audio seconds from the AUDIO tokens
        (32 per second) and its tokens on ``Reply.usage``. Raises ``ValueError`` for a Gemini
        answer without text (the walk fails over)."""
        assert success.body is not None
        if lane.provider.protocol == "gemini":
            assert self.form is not None and success.doc is not None
            text, seconds, inp, out = read_answer(success.doc)
            ctype, data = write_answer(self.kind, self.form, text, seconds)
            reply = Reply(200, {"content-type": ctype}, data)
            reply.usage.input_tokens, reply.usage.output_tokens = inp, out
            reply.op_usage = OpUsage("audio", audio_seconds=seconds)
            return reply
        doc = success.doc
        ctype = success.response.headers.get("content-type", "application/json")
        reply = Reply(200, {"content-type": ctype}, success.body)
        if (self.form is not None and doc is not None
                and upstream_format(self.form.response_format, lane.upstream_model) is not None):
            ctype, data = render(self.form.response_format, doc)
            reply = Reply(200, {"content-type": ctype}, data)
        reply.op_usage = OpUsage("audio", audio_seconds=audio_seconds(doc))
        reply.usage.input_tokens, reply.usage.output_tokens = token_usage(doc)
        return reply

    def stream_reply(self, call: Call, lane: Lane, success: AttemptSuccess, bounds: StreamLimits,
                     on_end: Callable[[bool | None], None]) -> Reply:
        """Speech: the upstream's audio bytes relayed as they arrive. A break or ``bounds.idle_s``
        of silence is a lane failure (``on_end(False)``) and cuts the client's connection mid-body
        (``StreamAborted``): audio has no in-band error, and a short body must not look whole."""
        resp = success.response
        headers = {"content-type": resp.headers.get("content-type", "application/octet-stream")}
        reply = Reply(200, headers, stream=_relay(resp, bounds.idle_s, on_end))
        reply.op_usage = OpUsage("audio", characters=len(str(self.req.get("input", ""))))
        return reply


async def _relay(resp: UpstreamResponse, idle_s: float,
                 on_end: Callable[[bool | None], None]) -> AsyncGenerator[bytes, None]:
    outcome: bool | None = None
    it = resp.chunks()
    try:
        while True:
            try:
                async with asyncio.timeout(idle_s or None):
                    chunk = await it.__anext__()
            except StopAsyncIteration:
                outcome = True
                return
            except (UpstreamError, TimeoutError) as e:
                outcome = False
                raise StreamAborted(f"speech audio from the upstream broke mid-body ({e or 'idle timeout'})") from None
            yield chunk
    finally:
        await resp.aclose()
        on_end(outcome)
