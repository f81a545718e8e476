"""Bedrock ``POST /model/{id}/invoke`` embeddings: Titan and Cohere-on-Bedrock bodies.

The invoke route carries many operations; an embeddings body is recognised by its keys
(``busbar.server.ops_routes``): Titan ``{"inputText", "dimensions", "normalize",
"embeddingTypes"}`` answered ``{"embedding": [...], "inputTextTokenCount",
"embeddingsByType"?}``; Cohere-on-Bedrock ``{"texts", "input_type", "truncate",
"embedding_types"}`` answered ``{"id", "embeddings": [[...]] | {"float": [...]}, "texts",
"response_type"}``.

Egress picks the body by the lane's model id: a ``cohere.`` model (``cohere.embed-…``, also behind
a region prefix such as ``us.cohere.…``) gets the Cohere body, anything else the Titan body. A Titan
model embeds one text per call, so a batch of more than one input skips a Titan lane (the walk
moves on without penalty).

Source: docs/beyond-chat.md#embeddings (Amazon Bedrock user guide, "Amazon Titan Embeddings" and
"Cohere Embed models").
"""
from __future__ import annotations

from typing import Any

from busbar.ir.ops import EmbedRequest, EmbedResponse
from busbar.proto.errors import BadRequest
from busbar.proto.ops.base import opt_int, vectors_of
from busbar.proto.ops.embed_cohere import EMBEDDING_TYPES, INPUT_TYPES, TRUNCATE, read_texts, write_body


def is_cohere(model: str) -> bool:
    """A Cohere model id on Bedrock (``cohere.embed-english-v3``, ``us.cohere.embed-v4:0``)."""
    return model.startswith("cohere.") or ".cohere." in model


class BedrockEmbed:
    """The ``("embeddings", "bedrock")`` codec (Titan and Cohere bodies)."""

    operation = "embeddings"
    protocol = "bedrock"
    passthrough = False

    def read_request(self, body: dict[str, Any], verb: str = "") -> EmbedRequest:
        """Raises ``BadRequest`` naming the field at fault."""
        if "inputText" in body:
            text = body["inputText"]
            if not isinstance(text, str):
                raise BadRequest("'inputText' must be a string")
            req = EmbedRequest([text], dimensions=opt_int(body, "dimensions"), single=True)
            req.names = {"dimensions": "dimensions", "titan": "1"}
            if body.get("embeddingTypes") not in (None, ["float"]):
                req.dropped.append("embeddingTypes")
            if body.get("normalize") is False:
                req.dropped.append("normalize")
            return req
        texts = read_texts(body)
        itype = body.get("input_type")
        if itype is not None and itype not in INPUT_TYPES:
            raise BadRequest(f"'input_type' must be one of {', '.join(INPUT_TYPES)}")
        trunc = body.get("truncate")
        if trunc is not None and trunc not in TRUNCATE:
            raise BadRequest("'truncate' must be NONE, START or END")
        types = body.get("embedding_types") or ["float"]
        if not isinstance(types, list) or not all(t in EMBEDDING_TYPES for t in types):
            raise BadRequest(f"'embedding_types' must be a list of {', '.join(EMBEDDING_TYPES)}")
        req = EmbedRequest(texts, input_type=None if itype == "image" else itype,
                           truncate=TRUNCATE[trunc] if trunc else None, encodings=tuple(types))
        req.names = {"input_type": "input_type", "truncate": "truncate", "by_type": "1"
                     if body.get("embedding_types") else ""}
        req.dropped += [f"embedding_types.{t}" for t in types if t != "float"]
        return req

    def write_request(self, req: EmbedRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        if is_cohere(upstream_model):
            body, dropped = write_body(req)
            if req.dimensions is not None:
                body["output_dimension"] = req.dimensions
            return body, dropped
        titan: dict[str, Any] = {"inputText": req.inputs[0]}
        if req.dimensions is not None:
            titan["dimensions"] = req.dimensions
        dropped = [req.names.get(k, k) for k in ("input_type", "truncate") if getattr(req, k) is not None]
        return titan, dropped

    def read_response(self, doc: dict[str, Any]) -> EmbedResponse:
        if "embedding" in doc:
            tokens = doc.get("inputTextTokenCount")
            return EmbedResponse(vectors_of([doc["embedding"]]), tokens if isinstance(tokens, int) else None)
        emb = doc["embeddings"]
        return EmbedResponse(vectors_of(emb["float"] if isinstance(emb, dict) else emb), None, doc.get("id"))

    def write_response(self, resp: EmbedResponse, req: EmbedRequest, model: str) -> dict[str, Any]:
        if req.names.get("titan"):
            return {"embedding": resp.vectors[0], "inputTextTokenCount": resp.input_tokens or 0,
                    "embeddingsByType": {"float": resp.vectors[0]}}
        by_type = bool(req.names.get("by_type"))
        return {"id": resp.id or "", "embeddings": {"float": resp.vectors} if by_type else resp.vectors,
                "texts": req.inputs, "response_type": "embeddings_by_type" if by_type else "embeddings_floats"}

    def serves(self, req: EmbedRequest, upstream_model: str) -> str | None:
        if len(req.inputs) > 1 and not is_cohere(upstream_model):
            return f"a Titan model embeds one input per call ({len(req.inputs)} given)"
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        tokens = doc.get("inputTextTokenCount")
        return tokens if isinstance(tokens, int) else None


CODEC = BedrockEmbed()
