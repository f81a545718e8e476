"""Gemini ``models/{model}:embedContent`` and ``:batchEmbedContents``: both directions.

Ingress: ``:embedContent`` ``{"content": {"parts": [{"text"}]}, "taskType", "title",
"outputDimensionality"}`` (one vector, answered ``{"embedding": {"values": [...]}}``);
``:batchEmbedContents`` ``{"requests": [{"model", "content", "taskType", ...}]}`` (answered
``{"embeddings": [{"values": [...]}]}``; the official ``google-genai`` SDK always sends this one).
snake_case spellings (``task_type``, ``output_dimensionality``) are read too. The requests of one
batch must agree on ``taskType`` and ``outputDimensionality`` (one upstream call carries one).
Egress: always ``:batchEmbedContents`` with ``model: "models/{upstream model}"`` per request.

``taskType`` maps to the canonical input type (``RETRIEVAL_DOCUMENT`` <-> ``search_document``,
``RETRIEVAL_QUERY`` <-> ``search_query``, ``CLASSIFICATION``, ``CLUSTERING``,
``SEMANTIC_SIMILARITY``); the Gemini API has no truncation switch and reports no token counts.

Source: docs/beyond-chat.md#embeddings (Gemini API reference, "Embeddings").
"""
from __future__ import annotations

from typing import Any

from busbar.ir.ops import EmbedRequest, EmbedResponse
from busbar.proto.errors import BadRequest

TASK_TYPES = {"RETRIEVAL_DOCUMENT": "search_document", "RETRIEVAL_QUERY": "search_query",
              "CLASSIFICATION": "classification", "CLUSTERING": "clustering",
              "SEMANTIC_SIMILARITY": "semantic_similarity"}
TASK_OF = {v: k for k, v in TASK_TYPES.items()}
GEMINI_ONLY = ("QUESTION_ANSWERING", "FACT_VERIFICATION", "CODE_RETRIEVAL_QUERY", "TASK_TYPE_UNSPECIFIED")


def _get(doc: dict[str, Any], camel: str, snake: str) -> Any:
    return doc.get(camel, doc.get(snake))


def _text(content: Any, where: str) -> str:
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not parts or not all(
            isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
        raise BadRequest(f"'{where}.parts' must be a non-empty list of text parts")
    return " ".join(p["text"] for p in parts)


class GeminiEmbed:
    """The ``("embeddings", "gemini")`` codec."""

    operation = "embeddings"
    protocol = "gemini"
    passthrough = False

    def read_request(self, body: dict[str, Any], verb: str = "") -> EmbedRequest:
        """Raises ``BadRequest`` naming the field at fault."""
        items: Any
        if verb == "embedContent":
            items, single = [body], True
            texts = [_text(body.get("content"), "content")]
        else:
            items = body.get("requests")
            if not isinstance(items, list) or not items or not all(isinstance(r, dict) for r in items):
                raise BadRequest("'requests' must be a non-empty list of embedContent requests")
            texts = [_text(r.get("content"), f"requests[{i}].content") for i, r in enumerate(items)]
            single = False
        task = _get(items[0], "taskType", "task_type")
        dims = _get(items[0], "outputDimensionality", "output_dimensionality")
        for i, r in enumerate(items[1:], 1):
            if _get(r, "taskType", "task_type") != task or \
                    _get(r, "outputDimensionality", "output_dimensionality") != dims:
                raise BadRequest(f"'requests[{i}]': every request of a batch must have the same taskType "
                                 "and outputDimensionality")
        if task is not None and task not in TASK_TYPES and task not in GEMINI_ONLY:
            raise BadRequest(f"'taskType' must be one of {', '.join([*TASK_TYPES, *GEMINI_ONLY])}")
        if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims < 1):
            raise BadRequest("'outputDimensionality' must be a positive integer")
        req = EmbedRequest(texts, input_type=TASK_TYPES.get(task) if task else None, dimensions=dims,
                           single=single)
        req.names = {"input_type": "taskType", "dimensions": "outputDimensionality"}
        if task in GEMINI_ONLY:
            req.dropped.append("taskType")
        if any(r.get("title") is not None for r in items):
            req.dropped.append("title")
        return req

    def write_request(self, req: EmbedRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        one: dict[str, Any] = {"model": f"models/{upstream_model}"}
        if req.input_type is not None:
            one["taskType"] = TASK_OF[req.input_type]
        if req.dimensions is not None:
            one["outputDimensionality"] = req.dimensions
        requests = [{**one, "content": {"parts": [{"text": t}]}} for t in req.inputs]
        dropped = [req.names.get("truncate", "truncate")] if req.truncate is not None else []
        return {"requests": requests}, dropped

    def read_response(self, doc: dict[str, Any]) -> EmbedResponse:
        if "embedding" in doc:
            items = [doc["embedding"]]
        else:
            items = doc["embeddings"]
        vectors = [list(e["values"]) for e in items]
        return EmbedResponse(vectors, None)

    def write_response(self, resp: EmbedResponse, req: EmbedRequest, model: str) -> dict[str, Any]:
        if req.single:
            return {"embedding": {"values": resp.vectors[0]}}
        return {"embeddings": [{"values": v} for v in resp.vectors]}

    def serves(self, req: EmbedRequest, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        return None


CODEC = GeminiEmbed()
