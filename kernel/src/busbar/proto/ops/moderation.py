"""Moderation: OpenAI ``POST /v1/moderations`` (same protocol only: no other protocol has it).

Request ``{"input": str | [str] | [parts], "model"}`` (``model`` names the pool or model, as on every
busbar route); the answer ``{"id", "model", "results": [{"flagged", "categories",
"category_scores", ...}]}`` is relayed as the upstream wrote it.

Source: docs/beyond-chat.md#moderation (OpenAI API reference, "Moderations").
"""
from __future__ import annotations

from typing import Any

from busbar.proto.errors import BadRequest


class OpenAIModeration:
    """The ``("moderation", "openai")`` codec: a pass-through (only an OpenAI lane serves it)."""

    operation = "moderation"
    protocol = "openai"
    passthrough = True

    def read_request(self, body: dict[str, Any], verb: str = "") -> dict[str, Any]:
        """Raises ``BadRequest`` when ``input`` is missing or not a string / non-empty list."""
        value = body.get("input")
        if not (isinstance(value, str) or (isinstance(value, list) and value)):
            raise BadRequest("'input' is required: a string or a non-empty list")
        return body

    def write_request(self, req: Any, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        return {**req, "model": upstream_model}, []

    def read_response(self, doc: dict[str, Any]) -> Any:
        return doc

    def write_response(self, resp: Any, req: Any, model: str) -> dict[str, Any]:
        return dict(resp)

    def serves(self, req: Any, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        return None


CODEC = OpenAIModeration()
