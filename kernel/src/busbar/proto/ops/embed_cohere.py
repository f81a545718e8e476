"""Cohere ``POST /v2/embed``: both directions.

Request: ``model``, ``texts`` (or ``inputs`` of ``{"content": [{"type": "text", "text"}]}``),
``input_type`` (``search_document`` | ``search_query`` | ``classification`` | ``clustering`` |
``image``), ``embedding_types`` (``float``, ``int8``, ``uint8``, ``binary``, ``ubinary``,
``base64``), ``truncate`` (``NONE`` | ``START`` | ``END``), ``output_dimension``. Answer:
``{"id", "embeddings": {"<type>": [...]}, "texts", "meta": {"api_version", "billed_units":
{"input_tokens"}}, "response_type": "embeddings_by_type"}``.

Across protocols the upstream is asked for floats; ``float`` and ``base64`` (float32, base64) are
rebuilt from them, the quantized types (``int8`` …) cannot be and are named in
``x-busbar-translation-dropped`` (``embedding_types.int8``).

Source: docs/beyond-chat.md#embeddings (Cohere API reference, "Embed API (v2)").
"""
from __future__ import annotations

import uuid
from typing import Any

from busbar.ir.ops import EmbedRequest, EmbedResponse
from busbar.proto.errors import BadRequest
from busbar.proto.ops.base import floats_b64, opt_int, text_list, vectors_of

INPUT_TYPES = ("search_document", "search_query", "classification", "clustering", "image")
EMBEDDING_TYPES = ("float", "int8", "uint8", "binary", "ubinary", "base64")
REBUILT = ("float", "base64")        # what a cross-protocol answer can carry
TRUNCATE = {"NONE": "none", "START": "start", "END": "end"}


def read_texts(body: dict[str, Any]) -> list[str]:
    """``texts``, or the text parts of ``inputs``. Raises ``BadRequest``."""
    if body.get("texts") is not None:
        return text_list(body["texts"], "texts", allow_single=False)[0]
    inputs = body.get("inputs")
    if isinstance(inputs, list) and inputs:
        texts: list[str] = []
        for i, item in enumerate(inputs):
            parts = item.get("content") if isinstance(item, dict) else None
            if not isinstance(parts, list) or not all(
                    isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                    for p in parts):
                raise BadRequest(f"'inputs[{i}].content' must be a list of text parts "
                                 "(image inputs cannot be routed)")
            texts.append(" ".join(p["text"] for p in parts))
        return texts
    raise BadRequest("'texts' is required: a non-empty list of strings")


class CohereEmbed:
    """The ``("embeddings", "cohere")`` codec."""

    operation = "embeddings"
    protocol = "cohere"
    passthrough = True

    def read_request(self, body: dict[str, Any], verb: str = "") -> EmbedRequest:
        """Raises ``BadRequest`` naming the field at fault."""
        texts = read_texts(body)
        itype = body.get("input_type")
        if itype is not None and itype not in INPUT_TYPES:
            raise BadRequest(f"'input_type' must be one of {', '.join(INPUT_TYPES)}")
        types = body.get("embedding_types") or ["float"]
        if not isinstance(types, list) or not all(t in EMBEDDING_TYPES for t in types):
            raise BadRequest(f"'embedding_types' must be a list of {', '.join(EMBEDDING_TYPES)}")
        trunc = body.get("truncate")
        if trunc is not None and trunc not in TRUNCATE:
            raise BadRequest("'truncate' must be NONE, START or END")
        req = EmbedRequest(texts, input_type=None if itype == "image" else itype,
                           truncate=TRUNCATE[trunc] if trunc else None,
                           dimensions=opt_int(body, "output_dimension"), encodings=tuple(types),
                           model=body.get("model"))
        req.names = {"input_type": "input_type", "truncate": "truncate", "dimensions": "output_dimension"}
        req.dropped += [f"embedding_types.{t}" for t in types if t not in REBUILT]
        if body.get("max_tokens") is not None:
            req.dropped.append("max_tokens")
        return req

    def write_request(self, req: EmbedRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        body, dropped = write_body(req)
        body["model"] = upstream_model
        if req.dimensions is not None:
            body["output_dimension"] = req.dimensions
        return body, dropped

    def read_response(self, doc: dict[str, Any]) -> EmbedResponse:
        emb = doc["embeddings"]
        vectors = vectors_of(emb["float"] if isinstance(emb, dict) else emb)
        return EmbedResponse(vectors, self.usage_of(doc), doc.get("id"))

    def write_response(self, resp: EmbedResponse, req: EmbedRequest, model: str) -> dict[str, Any]:
        emb: dict[str, Any] = {}
        for t in req.encodings:
            if t == "float":
                emb["float"] = resp.vectors
            elif t == "base64":
                emb["base64"] = [floats_b64(v) for v in resp.vectors]
        meta: dict[str, Any] = {"api_version": {"version": "2"}}
        if resp.input_tokens is not None:
            meta["billed_units"] = {"input_tokens": resp.input_tokens}
        return {"id": resp.id or str(uuid.uuid4()), "embeddings": emb, "texts": req.inputs, "meta": meta,
                "response_type": "embeddings_by_type"}

    def serves(self, req: EmbedRequest, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        meta = doc.get("meta")
        units = meta.get("billed_units") if isinstance(meta, dict) else None
        tokens = units.get("input_tokens") if isinstance(units, dict) else None
        return int(tokens) if isinstance(tokens, (int, float)) else None


def write_body(req: EmbedRequest) -> tuple[dict[str, Any], list[str]]:
    """The Cohere-shaped body (no model) shared with Cohere-on-Bedrock, and what it dropped:
    ``texts``, ``input_type`` (``search_document`` when the source has none or one Cohere lacks,
    e.g. Gemini ``SEMANTIC_SIMILARITY``: Cohere v3 models require one), ``truncate``,
    ``embedding_types: ["float"]``."""
    dropped: list[str] = []
    itype = req.input_type
    if itype is not None and itype not in INPUT_TYPES:
        dropped.append(req.names.get("input_type", "input_type"))
        itype = None
    body: dict[str, Any] = {"texts": req.inputs, "input_type": itype or "search_document",
                            "embedding_types": ["float"]}
    if req.truncate is not None:
        body["truncate"] = req.truncate.upper()
    return body, dropped


CODEC = CohereEmbed()
