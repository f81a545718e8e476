"""Path parsing: split a request path into (prefix, endpoint) and read the gwbench knobs in the prefix.

Any prefix may stand before ``/v1`` (``base_url = http://127.0.0.1:9100/prefix/v1`` works). Prefix
segments of the form ``d<ms>``, ``c<n>`` and ``i<ms>`` are knobs, as in the gwbench harness's mock upstream:

- ``/d<ms>``: delay before the headers (and so before the first stream chunk);
- ``/c<n>``: number of text pieces = stream content chunks = completion tokens;
- ``/i<ms>``: pause between stream frames.

E.g. ``POST /d50/c16/i5/v1/chat/completions``. Other prefix segments are ignored. Values are
clamped: delays to 0..3 600 000 ms, chunks to 1..4096.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Route", "route"]

_KNOB = re.compile(r"^([dci])(\d+(?:\.\d+)?)$")
_MAX_DELAY_MS = 3_600_000.0
_MAX_CHUNKS = 4096


@dataclass(slots=True, frozen=True)
class Route:
    """A parsed path.

    Attributes:
        prefix: everything before ``/v1/`` ("" when none).
        endpoint: the path from ``/v1/`` on (e.g. ``/v1/messages``), or "" when the path has no ``/v1/``.
        delay_ms / chunks / chunk_delay_ms: knob values, None when not given in the prefix.
    """

    prefix: str
    endpoint: str
    delay_ms: float | None = None
    chunks: int | None = None
    chunk_delay_ms: float | None = None
    model: str | None = None  # path-model protocols (Gemini, Bedrock): the model named in the URL
    stream: bool | None = None  # path-model protocols: the stream flag the verb implies


# Path-model endpoints: Gemini ``.../models/{model}:generateContent|:streamGenerateContent`` and
# Bedrock ``.../model/{modelId}/converse|converse-stream``. The endpoint key of a Gemini stream
# says whether ``?alt=sse`` was asked (SSE) or not (one JSON array).
_PATH_MODEL = re.compile(
    r"/models/([^/]+):(generateContent|streamGenerateContent|embedContent|batchEmbedContents|predict)$"
    r"|/model/(.+)/(converse|converse-stream|invoke)$"
)


def route(path: str, query: str = "") -> Route:
    """Parse a request path (see the module docstring); ``query`` is the raw query string."""
    pm = _PATH_MODEL.search(path)
    if pm is not None:
        knobs = route(path[: pm.start()] + "/v1/")
        if pm.group(1) is not None and pm.group(2) in ("embedContent", "batchEmbedContents", "predict"):
            stream, endpoint, model = False, ":" + pm.group(2), pm.group(1)
        elif pm.group(1) is not None:
            stream = pm.group(2) == "streamGenerateContent"
            sse = stream and "alt=sse" in query.split("&")
            endpoint, model = ":" + pm.group(2) + ("?alt=sse" if sse else ""), pm.group(1)
        else:
            stream, endpoint, model = pm.group(4) == "converse-stream", "/" + pm.group(4), pm.group(3)
        return Route(
            path[: pm.start()], endpoint, knobs.delay_ms, knobs.chunks, knobs.chunk_delay_ms, model, stream
        )
    i = path.find("/v1/")
    if i < 0:
        i = path.find("/v2/")  # Cohere v2 (``/v2/chat``)
    if i < 0:
        return Route(path, "")
    prefix, endpoint = path[:i], path[i:].rstrip("/")
    if not prefix:
        return Route("", endpoint)
    delay = chunks = gap = None
    for seg in prefix.split("/"):
        m = _KNOB.match(seg)
        if m is None:
            continue
        num = float(m.group(2))
        if m.group(1) == "d":
            delay = min(num, _MAX_DELAY_MS)
        elif m.group(1) == "c":
            chunks = int(min(max(num, 1), _MAX_CHUNKS))
        else:
            gap = min(num, _MAX_DELAY_MS)
    return Route(prefix, endpoint, delay, chunks, gap)
