"""Does a 2xx upstream answer look like a success? A bad one is an upstream fault, never a success.

An upstream (or a proxy or captive portal in front of it) can answer 2xx with something that is not
an answer: an HTML page, an empty body, SSE text on a non-stream request, a JSON ``{"error": …}``
document, a 204. Relayed on a same-protocol hop the client would see a "successful" garbage body;
translated, an empty successful message. So before an attempt commits:

- ``json_verdict(protocol, status, headers, body) -> (doc, None) | (None, reason)`` for a non-stream answer:
  the content type (when given) names JSON, the body parses as a JSON object, carries no non-null
  top-level ``error`` (a Responses success has ``"error": null``) and no Anthropic ``"type": "error"``,
  and holds the envelope key of its protocol with its JSON type (:data:`ENVELOPE_KEYS`). The parsed ``doc`` is the one
  a cross-protocol hop translates (one parse per answer).
- ``stream_verdict(status, headers) -> reason | None`` for a stream: a content type that says JSON, HTML or
  plain text is not an event stream. A stream that ends before its first event is refused by the
  attempt (``proxy/attempt.py``).

``reason`` is one line for the client's 503 and the log, naming what was wrong (never the body).
Each refusal fails over like a 5xx (disposition ``server_error``; docs/reliability.md).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

#: Top-level keys of a successful non-stream answer with the JSON type each must have, per protocol
#: (any one of them must be present). The type matters: Cohere's error body is ``{"message": "…"}``.
ENVELOPE_KEYS: dict[str, tuple[tuple[str, type], ...]] = {
    "openai": (("choices", list),),
    "anthropic": (("content", list),),
    "bedrock-invoke": (("content", list),),
    "responses": (("output", list),),
    # a blocked prompt has promptFeedback and no candidates; a :countTokens answer is {"totalTokens": n}
    "gemini": (("candidates", list), ("promptFeedback", dict), ("totalTokens", int)),
    "bedrock": (("output", dict),),
    "cohere": (("message", dict),),
    # non-chat operations ("<protocol>:<operation>", busbar.proxy.operation)
    "openai:embeddings": (("data", list),),
    "cohere:embeddings": (("embeddings", dict), ("embeddings", list)),
    "gemini:embeddings": (("embeddings", list), ("embedding", dict)),
    "bedrock:embeddings": (("embedding", list), ("embeddings", list), ("embeddings", dict)),
    "cohere:rerank": (("results", list),),
    "bedrock:rerank": (("results", list),),
    "openai:moderation": (("results", list),),
    "openai:images": (("data", list),),
    "gemini:images": (("predictions", list),),
    "gemini:audio": (("candidates", list),),
    "bedrock:images": (("images", list),),
}

_NOT_A_STREAM = ("application/json", "text/html", "text/plain")


def _mime(headers: Mapping[str, str]) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def json_verdict(protocol: str, status: int, headers: Mapping[str, str],
                 body: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``(doc, None)`` when ``body`` is a success envelope of ``protocol``, else ``(None, reason)``
    (``reason`` e.g. ``HTTP 200 with content-type text/html, not JSON``)."""
    mime = _mime(headers)
    if mime and "json" not in mime:
        return None, f"HTTP {status} with content-type {mime}, not JSON"
    if not body.strip():
        return None, f"HTTP {status} with an empty body"
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, f"HTTP {status} with a body that is not valid JSON"
    if not isinstance(doc, dict):
        return None, f"HTTP {status} with a JSON {type(doc).__name__}, not an object"
    if doc.get("error") is not None or doc.get("type") == "error":
        return None, f"HTTP {status} with an error body"
    keys = ENVELOPE_KEYS.get(protocol)
    if keys is not None and not any(isinstance(doc.get(k), t) for k, t in keys):
        want = " or ".join(f"{k} {({list: 'list', dict: 'object', int: 'integer'})[t]}" for k, t in keys)
        return None, f"HTTP {status} with a body that is not an answer of protocol {protocol} (no {want})"
    return doc, None


def stream_verdict(status: int, headers: Mapping[str, str]) -> str | None:
    """A reason when a 2xx answer to a stream request is plainly not an event stream, else ``None``."""
    mime = _mime(headers)
    if mime in _NOT_A_STREAM:
        return f"HTTP {status} with content-type {mime} to a stream request"
    return None
