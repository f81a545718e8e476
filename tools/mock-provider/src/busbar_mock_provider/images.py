"""Image generation endpoints, built from the providers' documented wire shapes.

- OpenAI ``POST /v1/images/generations``: ``{"model", "prompt", "n"?, "size"?, "response_format"?:
  "url" | "b64_json"}`` -> ``{"created", "data": [{"url"} | {"b64_json"}]}`` (URLs under
  ``https://mock-images.invalid/``).
- Gemini ``POST .../models/{m}:predict`` (Imagen): ``{"instances": [{"prompt"}], "parameters":
  {"sampleCount"?, "aspectRatio"?}}`` -> ``{"predictions": [{"bytesBase64Encoded", "mimeType"}]}``.
- Bedrock ``POST /model/{id}/invoke`` with ``{"taskType": "TEXT_IMAGE", "textToImageParams":
  {"text"}, "imageGenerationConfig"?: {"numberOfImages"?, ...}}`` -> ``{"images": [...], "error":
  null}`` (handled by ``embeddings.BedrockInvokeEmbed``, which calls :func:`image_b64`).

Every image is the same 1x1 PNG (:data:`PNG_B64`); answers differ only in their count.
Shapes' provenance: ``fixtures/README.md``.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from .base import ErrorReply, Rendered, mint_id
from .gemini import GeminiGenerate
from .gemini import error_body as gemini_error
from .openai_chat import OpenAIChat
from .openai_chat import error_body as openai_error
from .reply import Prompt, Reply

__all__ = ["PNG_B64", "GeminiPredict", "OpenAIImages", "image_count"]

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
"""A 1x1 PNG, base64: every image the mock generates."""


def image_count(value: Any) -> int | None:
    """``n`` / ``sampleCount`` / ``numberOfImages``: 1 when absent, ``None`` when invalid."""
    if value is None:
        return 1
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 10:
        return value
    return None


class OpenAIImages(OpenAIChat):
    """``/v1/images/generations`` (``match.protocol: "openai"``)."""

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        prompt, n = body.get("prompt"), image_count(body.get("n"))
        if not isinstance(prompt, str) or not prompt:
            return ErrorReply(400, openai_error("'prompt' is a required property", "invalid_request_error", "prompt"))
        fmt = body.get("response_format", "url")
        if n is None or fmt not in ("url", "b64_json"):
            return ErrorReply(400, openai_error("Invalid 'n' or 'response_format'", "invalid_request_error"))
        return Prompt(model=str(body.get("model", "")), state={"n": n, "b64": fmt == "b64_json"})

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        st = prompt.state or {}
        data = [{"b64_json": PNG_B64} if st["b64"] else
                {"url": f"https://mock-images.invalid/{mint_id('img-', seq, 24, salt='img')}-{i}.png"}
                for i in range(st["n"])]
        return Rendered("application/json", body=orjson.dumps({"created": int(time.time()), "data": data}))


class GeminiPredict(GeminiGenerate):
    """``:predict`` (Imagen; ``match.protocol: "gemini"``)."""

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        inst = body.get("instances")
        if not isinstance(inst, list) or not inst or not isinstance(inst[0], dict) \
                or not isinstance(inst[0].get("prompt"), str):
            return ErrorReply(400, gemini_error(400, "* instances[0].prompt: required"))
        n = image_count((body.get("parameters") or {}).get("sampleCount"))
        if n is None:
            return ErrorReply(400, gemini_error(400, "Invalid value at 'parameters.sampleCount'"))
        return Prompt(model=str(body.get("model", "")), state={"n": n})

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        preds = [{"bytesBase64Encoded": PNG_B64, "mimeType": "image/png"} for _ in range((prompt.state or {})["n"])]
        return Rendered("application/json", body=orjson.dumps({"predictions": preds}))
