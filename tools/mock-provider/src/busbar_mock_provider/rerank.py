"""Rerank and moderation endpoints, built from the providers' documented wire shapes.

- Cohere ``POST /v2/rerank``: ``{"model", "query", "documents": [str], "top_n"?}`` ->
  ``{"id", "results": [{"index", "relevance_score"}] (best first, top_n of them), "meta":
  {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}``.
- Bedrock ``POST /model/{id}/invoke`` with ``{"query", "documents", "top_n"?, "api_version"?}``
  (Cohere Rerank and Amazon Rerank models; a ``cohere.`` model requires ``api_version: 2``) ->
  ``{"id", "results": [...]}`` (handled by ``embeddings.BedrockInvokeEmbed``, which calls
  :func:`read_rerank` / :func:`rerank_results`).
- OpenAI ``POST /v1/moderations``: ``{"input", "model"?}`` -> ``{"id": "modr-…", "model", "results":
  [{"flagged", "categories", "category_scores", "category_applied_input_types"}]}``; a text with the
  word ``kill`` is flagged ``violence``.

Scores are deterministic: the share of query words found in the document (0.9 of the score) plus a
digest-derived tiebreak (0.1). Shapes' provenance: ``fixtures/README.md`` ("Embeddings, rerank and
moderation").
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from .base import ErrorReply, Rendered, mint_id
from .cohere import CohereChat
from .cohere import error_body as cohere_error
from .openai_chat import OpenAIChat
from .openai_chat import error_body as openai_error
from .reply import Prompt, Reply

__all__ = ["CohereRerank", "OpenAIModeration", "read_rerank", "rerank_results", "score"]

CATEGORIES = ("harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
              "self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence",
              "violence/graphic")


def score(query: str, document: str) -> float:
    """The mock's relevance of ``document`` to ``query`` (0..1, see the module docstring)."""
    words = {w.lower() for w in query.split()}
    found = {w.lower() for w in document.split()} & words
    tie = hashlib.blake2b(f"{query}\x00{document}".encode(), digest_size=1).digest()[0] / 255
    return round(0.9 * len(found) / max(1, len(words)) + 0.1 * tie, 6)


def read_rerank(body: dict[str, Any]) -> tuple[str, list[str], int | None] | str:
    """``(query, documents, top_n)`` of a rerank body, or the fault text."""
    query, docs, top_n = body.get("query"), body.get("documents"), body.get("top_n")
    if not isinstance(query, str) or not query:
        return "invalid request: query must be a non-empty string"
    if not isinstance(docs, list) or not docs or not all(isinstance(d, str) for d in docs):
        return "invalid request: documents must be a non-empty list of strings"
    if top_n is not None and (not isinstance(top_n, int) or top_n < 1):
        return "invalid request: top_n must be a positive integer"
    return query, docs, top_n


def rerank_results(query: str, docs: list[str], top_n: int | None) -> list[dict[str, Any]]:
    """``results`` best first (ties by index), ``top_n`` of them."""
    ranked = sorted(((score(query, d), i) for i, d in enumerate(docs)), key=lambda r: (-r[0], r[1]))
    return [{"index": i, "relevance_score": s} for s, i in ranked[: top_n or len(docs)]]


class CohereRerank(CohereChat):
    """``/v2/rerank`` (``match.protocol: "cohere"``)."""

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return ErrorReply(400, cohere_error("invalid request: model must be specified"))
        got = read_rerank(body)
        if isinstance(got, str):
            return ErrorReply(400, cohere_error(got))
        return Prompt(model=model, state={"rerank": got})

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        query, docs, top_n = (prompt.state or {})["rerank"]
        doc = {"id": mint_id("", seq, 36, salt="rerank"), "results": rerank_results(query, docs, top_n),
               "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}
        return Rendered("application/json", body=orjson.dumps(doc))


class OpenAIModeration(OpenAIChat):
    """``/v1/moderations`` (``match.protocol: "openai"``)."""

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        value = body.get("input")
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return ErrorReply(400, openai_error("'input' is a required property", "invalid_request_error", "input"))
        return Prompt(model=str(body.get("model") or "omni-moderation-latest"), state={"texts": texts})

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        results = []
        for text in (prompt.state or {})["texts"]:
            violent = "kill" in text.lower().split()
            cats = {c: violent and c == "violence" for c in CATEGORIES}
            scores = {c: (0.91 if cats[c] else 0.0001) for c in CATEGORIES}
            results.append({"flagged": violent, "categories": cats, "category_scores": scores,
                            "category_applied_input_types": {c: ["text"] for c in CATEGORIES}})
        doc = {"id": mint_id("modr-", seq, 29, salt="modr"), "model": prompt.model, "results": results}
        return Rendered("application/json", body=orjson.dumps(doc))
