"""Image generation: OpenAI ``/v1/images/generations``, Gemini ``:predict`` (Imagen) and Bedrock
``invoke`` ``TEXT_IMAGE`` bodies (Titan Image Generator, Nova Canvas), both directions.

- OpenAI: ``{"model", "prompt", "n", "size": "WxH", "response_format": "url" | "b64_json",
  "quality"?, "style"?}`` answered ``{"created", "data": [{"b64_json"} | {"url"}]}``. Across
  protocols the upstream is asked for ``b64_json``; a client that asked for ``url`` gets a
  ``data:`` URL of the image (busbar hosts no files).
- Gemini: ``{"instances": [{"prompt"}], "parameters": {"sampleCount", "aspectRatio"?,
  "negativePrompt"?}}`` answered ``{"predictions": [{"bytesBase64Encoded", "mimeType"}]}``. A size
  maps to the nearest of Imagen's aspect ratios (1:1, 3:4, 4:3, 9:16, 16:9).
- Bedrock: ``{"taskType": "TEXT_IMAGE", "textToImageParams": {"text", "negativeText"?},
  "imageGenerationConfig": {"numberOfImages", "width", "height", ...}}`` answered ``{"images":
  [base64, ...]}``.

Source: docs/beyond-chat.md#images (OpenAI API reference "Images"; Gemini API "Imagen"; Amazon
Bedrock user guide "Amazon Titan Image Generator" / "Amazon Nova Canvas" request and response).
"""
from __future__ import annotations

import time
from typing import Any

from busbar.ir.ops import ImageRequest, ImageResponse
from busbar.proto.errors import BadRequest

_RATIOS = {"1:1": 1.0, "3:4": 0.75, "4:3": 4 / 3, "9:16": 9 / 16, "16:9": 16 / 9}
_SIZE_OF = {"1:1": "1024x1024", "3:4": "896x1280", "4:3": "1280x896", "9:16": "768x1408", "16:9": "1408x768"}


def _n(value: Any, field: str) -> int:
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10:
        raise BadRequest(f"'{field}' must be an integer from 1 to 10")
    return value


def _wh(size: str) -> tuple[int, int]:
    w, _, h = size.partition("x")
    return int(w), int(h)


def _size(value: Any) -> str | None:
    if value is None or value == "auto":
        return None
    if not isinstance(value, str) or not all(p.isdigit() for p in value.split("x")) or value.count("x") != 1:
        raise BadRequest("'size' must be WIDTHxHEIGHT, e.g. 1024x1024")
    return value


def aspect(size: str) -> str:
    """The Imagen aspect ratio nearest to ``size`` (``"1536x1024"`` -> ``"4:3"``)."""
    w, h = _wh(size)
    return min(_RATIOS, key=lambda r: abs(_RATIOS[r] - w / h))


class _Images:
    """What the three image codecs share: the operation, no native-serving shortcut and the usage
    count (the length of the answer's ``_IMAGES`` list; ``None`` when it is not a list)."""

    operation = "images"
    _IMAGES = ""

    def serves(self, req: ImageRequest, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        items = doc.get(self._IMAGES)
        return len(items) if isinstance(items, list) else None


class OpenAIImages(_Images):
    """The ``("images", "openai")`` codec."""

    protocol = "openai"
    _IMAGES = "data"
    passthrough = True

    def read_request(self, body: dict[str, Any], verb: str = "") -> ImageRequest:
        """Raises ``BadRequest`` naming the field at fault."""
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise BadRequest("'prompt' is required: a non-empty string")
        fmt = body.get("response_format") or "url"
        if fmt not in ("url", "b64_json"):
            raise BadRequest("'response_format' must be 'url' or 'b64_json'")
        req = ImageRequest(prompt, _n(body.get("n"), "n"), _size(body.get("size")), fmt)
        req.dropped += [k for k in ("quality", "style", "background", "user") if body.get(k) is not None]
        return req

    def write_request(self, req: ImageRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        body: dict[str, Any] = {"model": upstream_model, "prompt": req.prompt, "n": req.n,
                                "response_format": "b64_json"}
        if req.size is not None:
            body["size"] = req.size
        return body, [req.negative_field] if req.negative else []

    def read_response(self, doc: dict[str, Any]) -> ImageResponse:
        return ImageResponse([(d.get("b64_json"), d.get("url")) for d in doc["data"]])

    def write_response(self, resp: ImageResponse, req: ImageRequest, model: str) -> dict[str, Any]:
        data: list[dict[str, Any]] = []
        for b64, url in resp.images:
            if req.response_format == "b64_json" and b64 is not None:
                data.append({"b64_json": b64})
            else:
                data.append({"url": url if url is not None else f"data:{resp.mime};base64,{b64}"})
        return {"created": int(time.time()), "data": data}


class GeminiImages(_Images):
    """The ``("images", "gemini")`` codec (``:predict``)."""

    protocol = "gemini"
    _IMAGES = "predictions"
    passthrough = False

    def read_request(self, body: dict[str, Any], verb: str = "") -> ImageRequest:
        """Raises ``BadRequest`` naming the field at fault."""
        inst = body.get("instances")
        if not isinstance(inst, list) or len(inst) != 1 or not isinstance(inst[0], dict) \
                or not isinstance(inst[0].get("prompt"), str) or not inst[0]["prompt"]:
            raise BadRequest("'instances' must hold one object with a non-empty 'prompt'")
        params = body.get("parameters") or {}
        if not isinstance(params, dict):
            raise BadRequest("'parameters' must be an object")
        ratio = params.get("aspectRatio")
        if ratio is not None and ratio not in _RATIOS:
            raise BadRequest(f"'parameters.aspectRatio' must be one of {', '.join(_RATIOS)}")
        req = ImageRequest(inst[0]["prompt"], _n(params.get("sampleCount"), "parameters.sampleCount"),
                           _SIZE_OF[ratio] if ratio else None, "b64_json", params.get("negativePrompt"),
                           "parameters.negativePrompt")
        req.dropped += [k for k in ("personGeneration", "safetySetting", "addWatermark") if k in params]
        return req

    def write_request(self, req: ImageRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        params: dict[str, Any] = {"sampleCount": req.n}
        if req.size is not None:
            params["aspectRatio"] = aspect(req.size)
        if req.negative:
            params["negativePrompt"] = req.negative
        return {"instances": [{"prompt": req.prompt}], "parameters": params}, []

    def read_response(self, doc: dict[str, Any]) -> ImageResponse:
        preds = doc["predictions"]
        mime = preds[0].get("mimeType", "image/png") if preds else "image/png"
        return ImageResponse([(p["bytesBase64Encoded"], None) for p in preds], mime)

    def write_response(self, resp: ImageResponse, req: ImageRequest, model: str) -> dict[str, Any]:
        return {"predictions": [{"bytesBase64Encoded": b64, "mimeType": resp.mime} for b64, _ in resp.images
                                if b64 is not None]}


class BedrockImages(_Images):
    """The ``("images", "bedrock")`` codec (``invoke`` ``TEXT_IMAGE`` bodies)."""

    protocol = "bedrock"
    _IMAGES = "images"
    passthrough = False

    def read_request(self, body: dict[str, Any], verb: str = "") -> ImageRequest:
        """Raises ``BadRequest`` naming the field at fault."""
        params = body.get("textToImageParams")
        if not isinstance(params, dict) or not isinstance(params.get("text"), str) or not params["text"]:
            raise BadRequest("'textToImageParams.text' is required: a non-empty string")
        cfg = body.get("imageGenerationConfig") or {}
        if not isinstance(cfg, dict):
            raise BadRequest("'imageGenerationConfig' must be an object")
        w, h = cfg.get("width"), cfg.get("height")
        size = f"{w}x{h}" if isinstance(w, int) and isinstance(h, int) else None
        req = ImageRequest(params["text"], _n(cfg.get("numberOfImages"), "imageGenerationConfig.numberOfImages"),
                           size, "b64_json", params.get("negativeText"), "textToImageParams.negativeText")
        req.dropped += [f"imageGenerationConfig.{k}" for k in ("cfgScale", "seed", "quality") if k in cfg]
        return req

    def write_request(self, req: ImageRequest, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        params: dict[str, Any] = {"text": req.prompt}
        if req.negative:
            params["negativeText"] = req.negative
        cfg: dict[str, Any] = {"numberOfImages": req.n}
        if req.size is not None:
            cfg["width"], cfg["height"] = _wh(req.size)
        return {"taskType": "TEXT_IMAGE", "textToImageParams": params, "imageGenerationConfig": cfg}, []

    def read_response(self, doc: dict[str, Any]) -> ImageResponse:
        return ImageResponse([(b, None) for b in doc["images"]])

    def write_response(self, resp: ImageResponse, req: ImageRequest, model: str) -> dict[str, Any]:
        return {"images": [b64 for b64, _ in resp.images if b64 is not None], "error": None}


OPENAI = OpenAIImages()
GEMINI = GeminiImages()
BEDROCK = BedrockImages()
