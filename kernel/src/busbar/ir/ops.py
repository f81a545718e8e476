"""The IR of the operations beyond chat: embeddings and rerank requests and answers.

A cross-protocol hop of a non-chat operation is ``ingress codec -> IR -> egress codec`` and back,
exactly like chat (``busbar.ir.model``), with one small IR per operation:

- ``EmbedRequest``: ``inputs`` (the texts, in order), ``input_type`` (canonical: ``search_document``,
  ``search_query``, ``classification``, ``clustering``, ``semantic_similarity``; ``None`` = unset),
  ``truncate`` (``none`` | ``start`` | ``end`` | ``None``), ``dimensions`` (output size or
  ``None``), ``encodings`` (what the client wants back: ``float``, ``base64`` …), ``single`` (the
  client sent one input, not a list: its answer has one vector), ``dropped`` (source-only fields
  no writer can carry, named in ``x-busbar-translation-dropped``), ``names`` (IR field -> the
  client's own spelling, for that header), ``tokens`` (OpenAI token-array input).
- ``EmbedResponse``: ``vectors`` (one list of floats per input, in input order), ``input_tokens``
  (``None`` when the provider does not report them), ``id``.
- ``RerankRequest`` / ``RerankResponse``: ``query``, ``documents`` (texts), ``top_n``; the answer is
  ``results`` (``(index, relevance_score)`` best first) and ``search_units``.
- ``ImageRequest`` / ``ImageResponse``: ``prompt``, ``n``, ``size`` (``"1024x1024"``),
  ``response_format`` (``b64_json`` | ``url``), ``negative`` prompt; the answer is ``images``
  (``(base64, url)`` pairs, one of them set) and their ``mime`` type.

``OpUsage`` is the normalised usage of one operation, on ``Reply.op_usage`` so that the limits
engine can charge it (docs/beyond-chat.md#usage): ``operation``, ``input_tokens`` (embeddings),
``search_units`` (rerank), ``images`` + ``image_size`` (images), ``audio_seconds`` /
``characters`` (audio).
"""
from __future__ import annotations

from dataclasses import dataclass, field

INPUT_TYPES = ("search_document", "search_query", "classification", "clustering", "semantic_similarity")
"""Canonical embedding input types (Cohere's names, plus Gemini's ``SEMANTIC_SIMILARITY``)."""

TRUNCATIONS = ("none", "start", "end")


@dataclass(slots=True)
class EmbedRequest:
    inputs: list[str]
    input_type: str | None = None
    truncate: str | None = None
    dimensions: int | None = None
    encodings: tuple[str, ...] = ("float",)
    single: bool = False
    model: str | None = None
    dropped: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)   # IR field -> the client's own field name
    tokens: bool = False         # OpenAI token-array input (only an OpenAI lane can take it)


@dataclass(slots=True)
class EmbedResponse:
    vectors: list[list[float]]
    input_tokens: int | None = None
    id: str | None = None


@dataclass(slots=True)
class RerankRequest:
    query: str
    documents: list[str]
    top_n: int | None = None
    model: str | None = None
    dropped: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RerankResponse:
    results: list[tuple[int, float]]
    search_units: int | None = None
    id: str | None = None


@dataclass(slots=True)
class ImageRequest:
    prompt: str
    n: int = 1
    size: str | None = None          # "WIDTHxHEIGHT"
    response_format: str = "b64_json"   # what the client wants back: b64_json | url
    negative: str | None = None
    negative_field: str = "negativePrompt"   # the client's name for it (x-busbar-translation-dropped)
    dropped: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ImageResponse:
    images: list[tuple[str | None, str | None]]   # (base64 bytes, URL) per image
    mime: str = "image/png"


@dataclass(slots=True)
class OpUsage:
    """Normalised usage of one non-chat operation (units the rate card prices)."""

    operation: str
    input_tokens: int = 0
    search_units: int = 0
    images: int = 0
    image_size: str | None = None
    audio_seconds: float = 0.0
    characters: int = 0
