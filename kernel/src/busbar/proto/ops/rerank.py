"""Rerank: Cohere ``POST /v2/rerank`` and Bedrock ``/model/{id}/invoke`` rerank bodies, both directions.

Cohere: ``{"model", "query", "documents": [str], "top_n"?, "max_tokens_per_doc"?}`` answered
``{"id", "results": [{"index", "relevance_score"}], "meta": {"api_version", "billed_units":
{"search_units"}}}``. Bedrock (Cohere Rerank and Amazon Rerank models on ``invoke``): ``{"query",
"documents": [str], "top_n"?, "api_version"?}`` answered ``{"id"?, "results": [{"index",
"relevance_score"}]}``; a ``cohere.`` model gets ``"api_version": 2``. A document given as
``{"text": …}`` is read as its text. Results are best first. Search units: the provider's count,
else one per started hundred documents (Cohere's definition).

Source: docs/beyond-chat.md#rerank (Cohere API reference "Rerank API (v2)"; Amazon Bedrock user guide
"Cohere Rerank 3.5").
"""
from __future__ import annotations

import math
import uuid
from typing import Any

from busbar.ir.ops import RerankRequest, RerankResponse
from busbar.proto.errors import BadRequest
from busbar.proto.ops.base import opt_int


def search_units(documents: int) -> int:
    """Search units of one query over ``documents`` documents when the provider reports none."""
    return max(1, math.ceil(documents / 100))


def _read(body: dict[str, Any]) -> RerankRequest:
    query = body.get("query")
    if not isinstance(query, str) or not query:
        raise BadRequest("'query' is required: a non-empty string")
    docs = body.get("documents")
    if not isinstance(docs, list) or not docs:
        raise BadRequest("'documents' is required: a non-empty list of strings")
    texts: list[str] = []
    for i, d in enumerate(docs):
        if isinstance(d, dict) and isinstance(d.get("text"), str):
            d = d["text"]
        if not isinstance(d, str):
            raise BadRequest(f"'documents[{i}]' must be a string")
        texts.append(d)
    return RerankRequest(query, texts, top_n=opt_int(body, "top_n"))


def _results(doc: dict[str, Any]) -> list[tuple[int, float]]:
    out = [(int(r["index"]), float(r["relevance_score"])) for r in doc["results"]]
    out.sort(key=lambda r: -r[1])
    return out


class CohereRerank:
    """The ``("rerank", "cohere")`` codec."""

    operation = "rerank"
    protocol = "cohere"
    passthrough = True

    def read_request(self, body: dict[str, Any], verb: str = "") -> RerankRequest:
        """Raises ``BadRequest`` naming the field at fault."""
        req = _read(body)
        req.model = body.get("model")
        if body.get("max_tokens_per_doc") is not None:
            req.dropped.append("max_tokens_per_doc")
        return req

    def write_request(self, req: RerankRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        body: dict[str, Any] = {"model": upstream_model, "query": req.query, "documents": req.documents}
        if req.top_n is not None:
            body["top_n"] = req.top_n
        return body, []

    def read_response(self, doc: dict[str, Any]) -> RerankResponse:
        return RerankResponse(_results(doc), self.usage_of(doc), doc.get("id"))

    def write_response(self, resp: RerankResponse, req: RerankRequest, model: str) -> dict[str, Any]:
        units = resp.search_units if resp.search_units is not None else search_units(len(req.documents))
        return {"id": resp.id or str(uuid.uuid4()),
                "results": [{"index": i, "relevance_score": s} for i, s in resp.results],
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": units}}}

    def serves(self, req: RerankRequest, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        meta = doc.get("meta")
        units = meta.get("billed_units") if isinstance(meta, dict) else None
        n = units.get("search_units") if isinstance(units, dict) else None
        return int(n) if isinstance(n, (int, float)) else None


class BedrockRerank:
    """The ``("rerank", "bedrock")`` codec (``invoke`` bodies)."""

    operation = "rerank"
    protocol = "bedrock"
    passthrough = False

    def read_request(self, body: dict[str, Any], verb: str = "") -> RerankRequest:
        """Raises ``BadRequest`` naming the field at fault."""
        return _read(body)

    def write_request(self, req: RerankRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        body: dict[str, Any] = {"query": req.query, "documents": req.documents}
        if req.top_n is not None:
            body["top_n"] = req.top_n
        if upstream_model.startswith("cohere.") or ".cohere." in upstream_model:
            body["api_version"] = 2
        return body, []

    def read_response(self, doc: dict[str, Any]) -> RerankResponse:
        return RerankResponse(_results(doc), None, doc.get("id"))

    def write_response(self, resp: RerankResponse, req: RerankRequest, model: str) -> dict[str, Any]:
        out: dict[str, Any] = {"results": [{"index": i, "relevance_score": s} for i, s in resp.results]}
        if resp.id:
            out = {"id": resp.id, **out}
        return out

    def serves(self, req: RerankRequest, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        return None


COHERE = CohereRerank()
BEDROCK = BedrockRerank()
