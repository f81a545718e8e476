"""Embeddings endpoints of the four protocols that have them, built from their documented wire shapes.

- OpenAI ``POST /v1/embeddings``: ``{"input", "model", "encoding_format"?, "dimensions"?}`` ->
  ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage":
  {"prompt_tokens", "total_tokens"}}`` (``base64``: little-endian float32 bytes).
- Cohere ``POST /v2/embed``: ``{"model", "texts", "input_type", "embedding_types"?, "truncate"?,
  "output_dimension"?}`` -> ``{"id", "embeddings": {"float"|"int8"|"base64": [...]}, "texts",
  "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens"}}, "response_type":
  "embeddings_by_type"}``.
- Gemini ``POST .../models/{m}:embedContent`` -> ``{"embedding": {"values"}}`` and
  ``:batchEmbedContents`` (every ``requests[].model`` must be ``models/{m}``) -> ``{"embeddings":
  [{"values"}]}``.
- Bedrock ``POST /model/{id}/invoke``: a rerank body (``query``) is answered by ``rerank.py``'s
  rules; otherwise a ``cohere.`` model id takes ``{"texts", "input_type",
  ...}`` -> ``{"id", "embeddings": [[...]] | {"float": [...]}, "texts", "response_type"}``; any other
  id is Titan: ``{"inputText", "dimensions"?}`` -> ``{"embedding", "inputTextTokenCount",
  "embeddingsByType": {"float"}}``.

Vectors are deterministic: ``DEFAULT_DIMENSIONS`` (8) values unless the request asks for another size,
each ``(b - 128) / 128`` for the bytes ``b`` of a BLAKE2b digest of the text (exact in float32, so
a base64 round trip is lossless). Input tokens are ``ceil(characters / 4)`` per text, as for chat.
Shapes' provenance: ``fixtures/README.md`` ("Embeddings").
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
import uuid
from typing import Any

import orjson

from .base import ErrorReply, Rendered
from .bedrock import BedrockConverse
from .cohere import CohereChat
from .cohere import error_body as cohere_error
from .gemini import GeminiGenerate
from .gemini import error_body as gemini_error
from .images import PNG_B64, image_count
from .openai_chat import OpenAIChat
from .openai_chat import error_body as openai_error
from .reply import Prompt, Reply
from .rerank import read_rerank, rerank_results

__all__ = ["BedrockInvokeEmbed", "CohereEmbed", "GeminiEmbed", "OpenAIEmbed", "vector"]

DEFAULT_DIMENSIONS = 8
_JSON = "application/json"


def vector(text: str, dims: int = DEFAULT_DIMENSIONS) -> list[float]:
    """The mock's embedding of ``text`` with ``dims`` values (see the module docstring)."""
    out: list[float] = []
    counter = 0
    while len(out) < dims:
        digest = hashlib.blake2b(f"{counter}:{text}".encode(), digest_size=64).digest()
        out.extend((b - 128) / 128 for b in digest)
        counter += 1
    return out[:dims]


def tokens(texts: list[str]) -> int:
    """Billed input tokens: ``ceil(characters / 4)`` per text (at least 1)."""
    return sum(max(1, math.ceil(len(t) / 4)) for t in texts)


def b64(vec: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()


def _dims(value: Any) -> int | None:
    if value is None:
        return DEFAULT_DIMENSIONS
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 4096:
        return value
    return None


def _state(model: str, texts: list[str], dims: int, **more: Any) -> Prompt:
    return Prompt(model=model, prompt_chars=sum(len(t) for t in texts),
                  state={"texts": texts, "dims": dims, **more})


def _json(doc: dict[str, Any]) -> Rendered:
    return Rendered(_JSON, body=orjson.dumps(doc))


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


class OpenAIEmbed(OpenAIChat):
    """``/v1/embeddings`` (``match.protocol: "openai"``)."""

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return ErrorReply(400, openai_error("you must provide a model parameter", "invalid_request_error"))
        value = body.get("input")
        texts = [value] if isinstance(value, str) else _str_list(value)
        if texts is None:
            return ErrorReply(400, openai_error("'input' is a required property", "invalid_request_error",
                                                "input"))
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            return ErrorReply(400, openai_error(f"'{fmt}' is not one of ['float', 'base64'] - 'encoding_format'",
                                                "invalid_request_error", "encoding_format"))
        dims = _dims(body.get("dimensions"))
        if dims is None:
            return ErrorReply(400, openai_error("'dimensions' must be a positive integer", "invalid_request_error",
                                                "dimensions"))
        return _state(model, texts, dims, b64=fmt == "base64")

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        st = prompt.state or {}
        data = [{"object": "embedding", "index": i,
                 "embedding": b64(vector(t, st["dims"])) if st["b64"] else vector(t, st["dims"])}
                for i, t in enumerate(st["texts"])]
        n = tokens(st["texts"])
        return _json({"object": "list", "data": data, "model": prompt.model,
                      "usage": {"prompt_tokens": n, "total_tokens": n}})


_COHERE_TYPES = ("float", "int8", "uint8", "binary", "ubinary", "base64")
_COHERE_INPUT_TYPES = ("search_document", "search_query", "classification", "clustering", "image")


def _cohere_embeddings(texts: list[str], dims: int, types: list[str]) -> dict[str, Any]:
    vecs = [vector(t, dims) for t in texts]
    out: dict[str, Any] = {}
    for kind in types:
        if kind == "float":
            out["float"] = vecs
        elif kind == "base64":
            out["base64"] = [b64(v) for v in vecs]
        elif kind == "int8":
            out["int8"] = [[round(x * 127) for x in v] for v in vecs]
        elif kind == "uint8":
            out["uint8"] = [[round(x * 127) + 128 for x in v] for v in vecs]
    return out


def _cohere_checks(body: dict[str, Any]) -> tuple[list[str], list[str]] | str:
    texts = _str_list(body.get("texts"))
    if texts is None:
        return "invalid request: texts must be a non-empty list of strings"
    if body.get("input_type") not in _COHERE_INPUT_TYPES:
        return "invalid request: valid input_type must be provided with the provided model"
    types = body.get("embedding_types") or ["float"]
    if not isinstance(types, list) or not all(t in _COHERE_TYPES for t in types):
        return f"invalid request: embedding_types must be a list of {', '.join(_COHERE_TYPES)}"
    if body.get("truncate") not in (None, "NONE", "START", "END"):
        return "invalid request: truncate must be one of NONE, START, END"
    return texts, types


class CohereEmbed(CohereChat):
    """``/v2/embed`` (``match.protocol: "cohere"``)."""

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return ErrorReply(400, cohere_error("invalid request: model must be specified"))
        checked = _cohere_checks(body)
        if isinstance(checked, str):
            return ErrorReply(400, cohere_error(checked))
        dims = _dims(body.get("output_dimension"))
        if dims is None:
            return ErrorReply(400, cohere_error("invalid request: output_dimension must be a positive integer"))
        return _state(model, checked[0], dims, types=checked[1])

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        st = prompt.state or {}
        return _json({"id": str(uuid.UUID(int=seq)), "embeddings": _cohere_embeddings(st["texts"], st["dims"],
                                                                                      st["types"]),
                      "texts": st["texts"],
                      "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": tokens(st["texts"])}},
                      "response_type": "embeddings_by_type"})


def _gemini_text(content: Any) -> str | None:
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) and isinstance(p.get("text"), str)
                                                           for p in parts):
        return None
    return " ".join(p["text"] for p in parts)


class GeminiEmbed(GeminiGenerate):
    """``:embedContent`` / ``:batchEmbedContents`` (``match.protocol: "gemini"``)."""

    def __init__(self, fixtures: Any, *, batch: bool) -> None:
        super().__init__(fixtures)
        self.batch = batch

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        model = str(body.get("model", ""))
        items = body.get("requests") if self.batch else [body]
        if not isinstance(items, list) or not items:
            return ErrorReply(400, gemini_error(400, "* BatchEmbedContentsRequest.requests: must not be empty"))
        texts: list[str] = []
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                return ErrorReply(400, gemini_error(400, f"Invalid value at 'requests[{i}]'"))
            if self.batch and item.get("model") != f"models/{model}":
                return ErrorReply(400, gemini_error(
                    400, f"* BatchEmbedContentsRequest.requests[{i}].model: the model must be models/{model}"))
            text = _gemini_text(item.get("content"))
            if text is None:
                return ErrorReply(400, gemini_error(400, "* EmbedContentRequest.content: contains an empty Part."))
            texts.append(text)
        dims = _dims(items[0].get("outputDimensionality"))
        if dims is None:
            return ErrorReply(400, gemini_error(400, "Invalid value at 'output_dimensionality'"))
        return _state(model, texts, dims)

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        st = prompt.state or {}
        if not self.batch:
            return _json({"embedding": {"values": vector(st["texts"][0], st["dims"])}})
        return _json({"embeddings": [{"values": vector(t, st["dims"])} for t in st["texts"]]})


def _bedrock_validation(message: str) -> ErrorReply:
    return ErrorReply(400, orjson.dumps({"message": message}), (("x-amzn-errortype", "ValidationException:http://"
                                                                 "internal.amazon.com/coral/com.amazon.bedrock/"),))


class BedrockInvokeEmbed(BedrockConverse):
    """``/model/{id}/invoke`` embeddings (``match.protocol: "bedrock"``): Titan or Cohere by model id."""

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        model = str(body.get("model", ""))
        if "textToImageParams" in body:         # an image body (Titan Image Generator / Nova Canvas)
            params, cfg = body["textToImageParams"], body.get("imageGenerationConfig") or {}
            n = image_count(cfg.get("numberOfImages") if isinstance(cfg, dict) else None)
            if not isinstance(params, dict) or not isinstance(params.get("text"), str) or n is None:
                return _bedrock_validation("Malformed input request: #/textToImageParams: required key [text] not "
                                           "found, please reformat your input and try again.")
            return Prompt(model=model, state={"images": n})
        if "query" in body:                     # a rerank body (Cohere Rerank / Amazon Rerank)
            got = read_rerank(body)
            if isinstance(got, str):
                return _bedrock_validation(f"Malformed input request: {got}")
            if (model.startswith("cohere.") or ".cohere." in model) and body.get("api_version") != 2:
                return _bedrock_validation("Malformed input request: #: required key [api_version] not found, "
                                           "please reformat your input and try again.")
            return Prompt(model=model, state={"rerank": got})
        if model.startswith("cohere.") or ".cohere." in model:
            checked = _cohere_checks(body)
            if isinstance(checked, str):
                return _bedrock_validation(f"Malformed input request: {checked}")
            return _state(model, checked[0], _dims(body.get("output_dimension")) or DEFAULT_DIMENSIONS,
                          cohere=True, by_type=body.get("embedding_types") is not None, types=checked[1])
        extra = sorted(set(body) - {"inputText", "dimensions", "normalize", "embeddingTypes", "model", "stream"})
        if extra:
            return _bedrock_validation(f"Malformed input request: extraneous key [{extra[0]}] is not permitted, "
                                       "please reformat your input and try again.")
        text = body.get("inputText")
        if not isinstance(text, str):
            return _bedrock_validation("Malformed input request: #: required key [inputText] not found, please "
                                       "reformat your input and try again.")
        dims = _dims(body.get("dimensions"))
        if dims is None:
            return _bedrock_validation("Malformed input request: dimensions must be a positive integer")
        return _state(model, [text], dims, cohere=False)

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        st = prompt.state or {}
        if "images" in st:
            return _json({"images": [PNG_B64] * st["images"], "error": None})
        if "rerank" in st:
            query, docs, top_n = st["rerank"]
            return _json({"id": str(uuid.UUID(int=seq)), "results": rerank_results(query, docs, top_n)})
        texts, dims = st["texts"], st["dims"]
        if not st["cohere"]:
            vec = vector(texts[0], dims)
            return _json({"embedding": vec, "inputTextTokenCount": tokens(texts), "embeddingsByType": {"float": vec}})
        if st["by_type"]:
            return _json({"id": str(uuid.UUID(int=seq)), "embeddings": _cohere_embeddings(texts, dims, st["types"]),
                          "texts": texts, "response_type": "embeddings_by_type"})
        return _json({"id": str(uuid.UUID(int=seq)), "embeddings": [vector(t, dims) for t in texts], "texts": texts,
                      "response_type": "embeddings_floats"})
