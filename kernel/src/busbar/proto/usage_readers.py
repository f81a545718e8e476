"""Usage read straight from a whole (non-stream) reply body, without reading the rest of it.

``read_usage(dialect, doc) -> Usage`` reads only the usage object of a passthrough reply (the
request record's usage: limits settlement, metering): per dialect, the same reader its
``read_response`` applies to the same field, so the figures are identical. A dialect without an
entry here (a plugin's, an operation codec's) falls back to ``dialect.read_response(doc).usage``.

Source: docs/limits.md#settlement.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from busbar.ir.model import Usage
from busbar.proto.anthropic.response import usage_from_anthropic
from busbar.proto.bedrock.response import usage_from_bedrock
from busbar.proto.cohere.response import usage_from_cohere
from busbar.proto.gemini.response import usage_from_gemini
from busbar.proto.openai.response import usage_from_openai
from busbar.proto.responses.response import usage_from_responses

if TYPE_CHECKING:
    from busbar.proto.base import Dialect

__all__ = ["READERS", "read_usage"]

#: dialect name -> (the reply's usage key, its reader)
READERS: dict[str, tuple[str, Callable[[dict[str, Any] | None], Usage]]] = {
    "openai": ("usage", usage_from_openai),
    "anthropic": ("usage", usage_from_anthropic),
    "responses": ("usage", usage_from_responses),
    "gemini": ("usageMetadata", usage_from_gemini),
    "bedrock": ("usage", usage_from_bedrock),
    "cohere": ("usage", usage_from_cohere),
}


def read_usage(dialect: Dialect, doc: dict[str, Any]) -> Usage:
    """The usage of ``doc``, a whole reply of ``dialect`` (zeros when it has none).

    Raises:
        whatever the dialect's reader raises on a malformed usage object (the caller logs it).
    """
    entry = READERS.get(dialect.name)
    if entry is None:
        return dialect.read_response(doc).usage
    key, reader = entry
    u = doc.get(key)
    return reader(u if isinstance(u, dict) else None)
