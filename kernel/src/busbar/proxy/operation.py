"""A non-chat operation on the failover walk: which lanes can serve it, their bodies, URLs and answers.

``Operation`` rides on ``Call.op`` (``None`` for chat) and is consulted by the walk at four seams:

- ``able(lane) -> str | None`` / ``unable(pool) -> set[int]``: a lane serves the operation when
  its model declares it (``models.*.operations``, default: its protocol's, see
  ``busbar.config.operations``), its protocol has a codec for it (``busbar.proto.ops``) and that codec takes this
  request (a Titan model embeds one input per call). The walk excludes the others up front: never
  tried, never penalized.
- ``body(call, lane) -> (bytes, dropped)``: same protocol with a pass-through codec: the client's
  bytes (``model`` rewritten when the lane's wire model differs); otherwise the IR written by the
  lane's codec, the fields neither side could carry named (``x-busbar-translation-dropped``).
- ``prepare(gw, provider, upstream_model, body) -> (url, headers, body)``: the operation's
  endpoint on that protocol (``EGRESS_PATHS``; Gemini ``:batchEmbedContents``, Bedrock
  ``/model/{id}/invoke``), with the provider's credential as for chat.
- ``reply(call, lane, success) -> Reply``: a same-protocol pass-through relays the bytes; otherwise
  the lane's answer is read into the IR and written in the client's shape. Either way
  ``Reply.usage.input_tokens`` and ``Reply.op_usage`` carry the normalised usage. An embedding
  answer that reports no tokens (the Gemini API, Cohere on Bedrock) is counted like a request's
  worst case: the UTF-8 bytes of its inputs / 4, rounded up (``embed_estimate``), never 0.
- ``rewrite(messages, tools) -> str | None``: a hook's rewrite arm (``busbar.hooks.chain``) replaces
  the texts hooks were shown (one message per text, same order); after it no hop is a pass-through.
  A rewrite that does not fit (another count, non-text blocks, tools, token-array input, an audio
  upload) is refused with the reason, and the gate's ``on_error`` applies, as for a malformed reply.

Source: docs/beyond-chat.md#how-a-pool-serves-an-operation.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from busbar.ir.model import IrMessage, IrRequest, TextBlock
from busbar.ir.ops import (
    EmbedRequest,
    EmbedResponse,
    ImageRequest,
    ImageResponse,
    OpUsage,
    RerankRequest,
    RerankResponse,
)
from busbar.limits.estimate import BYTES_PER_TOKEN
from busbar.proto.ops import codec
from busbar.proto.ops.rerank import search_units
from busbar.proxy.relay import Reply
from busbar.proxy.success import json_verdict
from busbar.proxy.upstream import Body

if TYPE_CHECKING:
    from busbar.proto.ops.base import OpCodec
    from busbar.proxy.attempt import AttemptSuccess
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.relay import StreamLimits
    from busbar.proxy.runtime import Lane, Pool, Provider
    from busbar.proxy.translate import Call

EGRESS_PATHS = {("embeddings", "openai"): "/v1/embeddings", ("embeddings", "cohere"): "/v2/embed",
                ("rerank", "cohere"): "/v2/rerank", ("moderation", "openai"): "/v1/moderations",
                ("images", "openai"): "/v1/images/generations"}
GEMINI_VERBS = {"embeddings": "batchEmbedContents", "images": "predict"}
"""The Gemini verb of each operation (the model is in the URL)."""
"""Upstream paths of the body-model protocols, appended to the provider's ``base_url``."""


class Operation:
    """One non-chat request's operation: its name, the client's codec and the parsed IR."""

    __slots__ = ("name", "ingress", "req", "verb", "rewritten")

    def __init__(self, name: str, ingress: OpCodec, req: Any, verb: str = ""):
        self.name = name            # "embeddings"
        self.ingress = ingress      # the codec of the client's protocol
        self.req = req              # the operation's IR (busbar.ir.ops)
        self.verb = verb            # the ingress path verb (Gemini embedContent | batchEmbedContents)
        self.rewritten = False      # a hook's rewrite replaced the texts: every hop writes the IR

    def rewrite(self, messages: list[IrMessage], tools: list[Any] | None) -> str | None:
        """Apply a hook's rewrite (``rewrite.messages``, text only, one message per text of
        ``ir_view``, in order) to this request's texts; returns why it cannot be applied (``None``:
        applied). From then on no hop forwards the client's bytes: every lane, same protocol
        included, gets the rewritten IR written by its codec, and the answer is written back in
        the client's shape."""
        if tools is not None:
            return f"a {self.name} request has no tools to rewrite"
        texts: list[str] = []
        for m in messages:
            if any(not isinstance(b, TextBlock) for b in m.content):
                return f"a rewrite of a {self.name} request must be text only"
            texts.append("".join(b.text for b in m.content if isinstance(b, TextBlock)))
        want = len(self.ir_view().messages)
        if len(texts) != want:
            return (f"a rewrite of a {self.name} request must keep one message per text ({want}); "
                    f"it has {len(texts)}")
        why = self._set_texts(texts)
        if why is None:
            self.rewritten = True
        return why

    def _set_texts(self, texts: list[str]) -> str | None:
        """Replace the texts ``ir_view`` projects (same count, same order); a reason when this
        request's texts cannot be replaced."""
        req = self.req
        if isinstance(req, RerankRequest):
            req.query, req.documents = texts[0], texts[1:]
        elif isinstance(req, EmbedRequest):
            if req.tokens:
                return "token-array embeddings input cannot be rewritten"
            req.inputs = texts
        elif isinstance(req, ImageRequest):
            req.prompt = texts[0]
        else:                        # moderation: the OpenAI body's string inputs, in order
            value = req.get("input")
            if isinstance(value, str):
                self.req = {**req, "input": texts[0]}
            else:
                it = iter(texts)
                self.req = {**req, "input": [next(it) if isinstance(v, str) else v for v in value]}
        return None

    def able(self, lane: Lane) -> str | None:
        """Why ``lane`` cannot serve this request, or ``None`` when it can."""
        protocol = lane.provider.protocol
        if self.name not in lane.operations:
            return f"model '{lane.name}' does not declare {self.name} (models.{lane.name}.operations)"
        egress = codec(self.name, protocol)
        if egress is None:
            return f"protocol {protocol} has no {self.name} endpoint"
        if getattr(self.req, "tokens", False) and egress is not self.ingress:
            return "token-array input can only go to a lane of the same protocol"
        return egress.serves(self.req, lane.upstream_model)

    def unable(self, pool: Pool) -> set[int]:
        """Indices of the members of ``pool`` that cannot serve this request."""
        return {m.index for m in pool.members if self.able(m.lane) is not None}

    def ir_view(self) -> IrRequest:
        """The request as a chat IR for hooks (each input one user message; sizes and prompt views)."""
        req = self.req
        if isinstance(req, RerankRequest):
            texts = [req.query, *req.documents]
        elif isinstance(req, EmbedRequest):
            texts = list(req.inputs)
        elif isinstance(req, ImageRequest):
            texts = [req.prompt]
        else:                        # moderation: the OpenAI body (input: a string or a list)
            value = req.get("input")
            texts = [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)]
        return IrRequest(messages=[IrMessage("user", [TextBlock(t)]) for t in texts])

    def _same(self, lane: Lane) -> bool:
        return lane.provider.protocol == self.ingress.protocol and self.ingress.passthrough and not self.rewritten

    def body(self, call: Call, lane: Lane) -> tuple[bytes, list[str]]:
        """The upstream body for ``lane`` and the client fields dropped on the way."""
        if self._same(lane):
            if call.client_model == lane.upstream_model:
                return call.raw, []
            return orjson.dumps({**call.body, "model": lane.upstream_model}), []
        egress = codec(self.name, lane.provider.protocol)
        assert egress is not None            # unable() kept this lane off the walk
        doc, dropped = egress.write_request(self.req, lane.upstream_model)
        return orjson.dumps(doc), [*getattr(self.req, "dropped", ()), *dropped]

    @property
    def binary(self) -> bool:
        """``True``: the answer is a byte stream committed at its headers (audio speech)."""
        return False

    async def prepare(self, gw: Gateway, provider: Provider, upstream_model: str,
                      body: Body) -> tuple[str, dict[str, str], Body]:
        """``(url, headers, body)`` of one attempt. Raises ``CredentialError`` like chat's ``prepare``."""
        from busbar.proto.bedrock.dialect import model_path, signed_egress
        from busbar.proto.gemini.dialect import egress_request as gemini_egress
        from busbar.proto.responses.dialect import egress_headers

        assert isinstance(body, bytes)       # only an audio upload is sent in chunks (busbar.proxy.audio)
        auth = await gw.credentials.headers(provider) if provider.auth is not None else None
        protocol = provider.protocol
        if protocol == "gemini":
            url, headers, body = gemini_egress(provider, upstream_model, False, body, auth)
            return f"{url.rsplit(':', 1)[0]}:{GEMINI_VERBS[self.name]}", headers, body
        if protocol == "bedrock":
            return signed_egress(provider, provider.base_url + model_path(upstream_model, "invoke"), False, body,
                                 auth)
        return provider.base_url + EGRESS_PATHS[(self.name, protocol)], egress_headers(provider, auth), body

    def verdict_key(self, protocol: str) -> str:
        """The ``busbar.proxy.success.ENVELOPE_KEYS`` entry of this operation's answers on ``protocol``."""
        return f"{protocol}:{self.name}"

    def verdict(self, protocol: str, status: int, headers: Mapping[str, str],
                body: bytes) -> tuple[dict[str, Any] | None, str | None]:
        """``(doc, None)`` for a 2xx body that answers this operation, else ``(None, reason)``
        (``busbar.proxy.success.json_verdict`` with this operation's envelope keys)."""
        return json_verdict(self.verdict_key(protocol), status, headers, body)

    def head_verdict(self, status: int, headers: Mapping[str, str]) -> str | None:
        """A ``binary`` operation's check of 2xx headers (a reason to fail over, or ``None``)."""
        return None

    def stream_reply(self, call: Call, lane: Lane, success: AttemptSuccess, bounds: StreamLimits,
                     on_end: Callable[[bool | None], None]) -> Reply:
        """The relay of a ``binary`` operation's committed answer (only those stream)."""
        raise NotImplementedError(f"the {self.name} operation does not stream")

    def reply(self, call: Call, lane: Lane, success: AttemptSuccess) -> Reply:
        """The client's answer to a committed 2xx (see the module docstring). Raises
        ``KeyError``/``TypeError``/``ValueError`` for a malformed upstream answer (the walk fails over)."""
        assert success.body is not None
        doc = success.doc if success.doc is not None else orjson.loads(success.body)
        egress = codec(self.name, lane.provider.protocol)
        assert egress is not None
        if self._same(lane):
            units = egress.usage_of(doc)
            reply = Reply(200, {"content-type": "application/json"}, success.body)
        else:
            resp = egress.read_response(doc)
            units = _check(resp, self.req)
            out = self.ingress.write_response(resp, self.req, call.called)
            reply = Reply(200, {"content-type": "application/json"}, orjson.dumps(out))
        reply.op_usage = usage = OpUsage(self.name)
        if isinstance(self.req, EmbedRequest):
            reply.usage.input_tokens = usage.input_tokens = units if units is not None else embed_estimate(self.req)
        elif isinstance(self.req, RerankRequest):
            usage.search_units = units if units is not None else search_units(len(self.req.documents))
        elif isinstance(self.req, ImageRequest):
            usage.images = units if units is not None else self.req.n
            usage.image_size = self.req.size
        return reply


def embed_estimate(req: EmbedRequest) -> int:
    """Input tokens of an embedding request whose answer reports none: each input's UTF-8 bytes /
    ``BYTES_PER_TOKEN``, rounded up (an average; the reservation held the bytes themselves, an upper
    bound: busbar.limits.estimate)."""
    return sum(-(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN) for text in req.inputs)


def _check(resp: Any, req: Any) -> int | None:
    """A translated answer's billed units, after checking it answers ``req`` (raises ``ValueError``)."""
    if isinstance(resp, EmbedResponse):
        if len(resp.vectors) != len(req.inputs):
            raise ValueError(f"{len(resp.vectors)} embeddings for {len(req.inputs)} inputs")
        return resp.input_tokens
    if isinstance(resp, RerankResponse):
        if any(not 0 <= i < len(req.documents) for i, _ in resp.results):
            raise ValueError("a rerank result names a document that was not sent")
        return resp.search_units
    if isinstance(resp, ImageResponse):
        if not resp.images or any(b is None and u is None for b, u in resp.images):
            raise ValueError("an image answer without images")
        return len(resp.images)
    return None
