"""OpenAI ``POST /v1/embeddings``: both directions.

Request: ``input`` (a string, a list of strings, or token arrays), ``model``, ``encoding_format``
(``float`` | ``base64``; the official SDK asks for ``base64`` by default), ``dimensions``,
``user``. Answer: ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
"model", "usage": {"prompt_tokens", "total_tokens"}}``; a ``base64`` embedding is the
little-endian float32 bytes, base64-encoded. OpenAI has no input type and no truncation switch:
a source that sets them names them in ``x-busbar-translation-dropped``.

Source: docs/beyond-chat.md#embeddings (OpenAI API reference, "Create embeddings").
"""
from __future__ import annotations

from typing import Any

from busbar.ir.ops import EmbedRequest, EmbedResponse
from busbar.proto.errors import BadRequest
from busbar.proto.ops.base import b64_floats, floats_b64, opt_int, text_list

ENCODINGS = ("float", "base64")


class OpenAIEmbed:
    """The ``("embeddings", "openai")`` codec."""

    operation = "embeddings"
    protocol = "openai"
    passthrough = True

    def read_request(self, body: dict[str, Any], verb: str = "") -> EmbedRequest:
        """Raises ``BadRequest`` for a missing/malformed ``input``, ``encoding_format`` or ``dimensions``."""
        value = body.get("input")
        if value is None:
            raise BadRequest("'input' is required: a string or a list of strings")
        tokens = _is_tokens(value)
        inputs: list[str]
        if tokens:
            inputs, single = [], isinstance(value[0], int)
        else:
            inputs, single = text_list(value, "input")
        fmt = body.get("encoding_format", "float")
        if fmt not in ENCODINGS:
            raise BadRequest("'encoding_format' must be 'float' or 'base64'")
        req = EmbedRequest(inputs, dimensions=opt_int(body, "dimensions"), encodings=(fmt,), single=single,
                           model=body.get("model"))
        req.names = {"dimensions": "dimensions"}
        if tokens:
            req.dropped.append("input")        # token arrays: only an OpenAI lane can take them
            req.tokens = True
        if body.get("user") is not None:
            req.dropped.append("user")
        return req

    def write_request(self, req: EmbedRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        body: dict[str, Any] = {"model": upstream_model, "input": req.inputs}
        if req.dimensions is not None:
            body["dimensions"] = req.dimensions
        dropped = []
        if req.input_type is not None:
            dropped.append(req.names.get("input_type", "input_type"))
        if req.truncate is not None:
            dropped.append(req.names.get("truncate", "truncate"))
        return body, dropped

    def read_response(self, doc: dict[str, Any]) -> EmbedResponse:
        data = sorted(doc["data"], key=lambda d: d.get("index", 0))
        vectors = [b64_floats(d["embedding"]) if isinstance(d["embedding"], str) else list(d["embedding"])
                   for d in data]
        usage = doc.get("usage") or {}
        tokens = usage.get("prompt_tokens")
        return EmbedResponse(vectors, tokens if isinstance(tokens, int) else None)

    def write_response(self, resp: EmbedResponse, req: EmbedRequest, model: str) -> dict[str, Any]:
        b64 = req.encodings == ("base64",)
        data = [{"object": "embedding", "index": i, "embedding": floats_b64(v) if b64 else v}
                for i, v in enumerate(resp.vectors)]
        tokens = resp.input_tokens or 0
        return {"object": "list", "data": data, "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def serves(self, req: EmbedRequest, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        """``usage.prompt_tokens`` of an answer (a same-protocol relay reads only this)."""
        usage = doc.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return tokens if isinstance(tokens, int) else None


def _is_tokens(value: Any) -> bool:
    """A token array (``[1, 2]``) or a list of them (``[[1, 2], [3]]``)."""
    if not isinstance(value, list) or not value:
        return False
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return True
    return all(isinstance(v, list) and v and all(isinstance(t, int) for t in v) for v in value)



CODEC = OpenAIEmbed()
