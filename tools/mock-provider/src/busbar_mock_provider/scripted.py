"""How a scripted ``response`` becomes an :class:`~.wire.Outcome` (bytes, status, headers, faults).

Precedence: ``fixture`` > ``sse`` > ``body`` / ``body_bytes`` > ``status`` >= 400 alone (the provider's own error
body: a real capture when one exists) > the default reply (``text`` replaces its text; a ``status``
below 400 replaces its status). Then ``headers`` override same-named headers, ``delay_ms`` and
``chunk_delay_ms`` replace the path knobs, and ``hang`` / ``drop_after`` / ``error_after`` are set.
``error_after`` applies to streamed answers only; ``gzip`` and ``body_bytes`` to plain answers only;
``stall_after`` and ``trickle_ms`` to both.

What must not live here: rule parsing and matching (``faults.py``), socket handling (``wire.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from . import fixtures as fx
from .base import Dialect
from .faults import ABSENT, ResponseSpec
from .wire import Outcome

__all__ = ["scripted_outcome"]


def _body_bytes(body: Any) -> tuple[bytes, str]:
    if isinstance(body, str):
        data = body.encode()
        try:
            orjson.loads(data)
        except orjson.JSONDecodeError:
            return data, "text/plain; charset=utf-8"
        return data, "application/json"
    return orjson.dumps(body), "application/json"


_PIECE_BYTES = 1 << 20


def _padded_json(size: int) -> Iterator[bytes]:
    """``{"pad":"aaa…"}`` of exactly ``size`` bytes (>= 16), in pieces of at most 1 MiB."""
    yield b'{"pad":"'
    left = size - 10
    block = b"a" * _PIECE_BYTES
    while left > 0:
        n = min(left, _PIECE_BYTES)
        yield block[:n]
        left -= n
    yield b'"}'


def _data_frame(item: Any) -> bytes:
    payload = item.encode() if isinstance(item, str) else orjson.dumps(item)
    return b"data: " + payload + b"\n\n"


def _generic_error_frame(error: Any) -> bytes:
    payload = (
        error
        if isinstance(error, dict)
        else {"error": {"message": error or "mock stream error", "type": "server_error"}}
    )
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def scripted_outcome(
    spec: ResponseSpec,
    dialect: Dialect | None,
    store: fx.FixtureStore,
    default: Callable[[str | None], Outcome],
    base_headers: list[tuple[str, str]],
    knobs: tuple[float, float],
) -> Outcome:
    """Turn a scripted response into an :class:`Outcome`.

    Args:
        spec: the rule's response.
        dialect: the protocol of the request (None for an unknown path).
        store: fixtures, for ``fixture``.
        default: builds the default-reply outcome, given ``spec.text`` (used when the spec has no
            body, fixture or sse and no error status).
        base_headers: headers every answer carries (the provider's request id).
        knobs: (delay_s, chunk_delay_s) from the path, used when the spec does not set them.
    """
    out: Outcome
    if spec.fixture is not None:
        rel = spec.fixture
        out = Outcome(spec.status or fx.status_for(rel), [("content-type", fx.content_type_for(rel))])
        if fx.is_stream(rel):
            out.frames = store.frames(rel)
        else:
            out.body = store.read(rel)
    elif spec.sse is not None:
        out = Outcome(spec.status or 200, [("content-type", "text/event-stream; charset=utf-8")])
        if isinstance(spec.sse, str):
            out.frames = fx.split_sse(spec.sse.encode())
        else:
            frame = dialect.sse_frame if dialect else _data_frame
            out.frames = [
                item["raw"].encode() if isinstance(item, dict) and set(item) == {"raw"} else frame(item)
                for item in spec.sse
            ]
    elif spec.body_bytes is not None:
        out = Outcome(spec.status or 200, [("content-type", "application/json")], pieces=_padded_json(spec.body_bytes))
    elif spec.body is not ABSENT:
        data, ctype = _body_bytes(spec.body)
        out = Outcome(spec.status or 200, [("content-type", ctype)], body=data)
    elif spec.status is not None and spec.status >= 400:
        if dialect is None:
            data = orjson.dumps({"error": {"code": spec.status, "message": f"Mock error {spec.status}."}})
            out = Outcome(spec.status, [("content-type", "application/json")], body=data)
        else:
            err = dialect.error_reply(spec.status)
            out = Outcome(err.status, [("content-type", "application/json"), *err.headers], body=err.body)
    else:
        out = default(spec.text)
        if spec.status is not None:
            out.status = spec.status
    present = {name for name, _ in out.headers}
    out.headers = out.headers + [h for h in base_headers if h[0] not in present]
    if spec.headers:
        out.headers = [h for h in out.headers if h[0] not in spec.headers] + list(spec.headers.items())
    out.delay_s = spec.delay_ms / 1000 if spec.delay_ms is not None else knobs[0]
    out.chunk_delay_s = spec.chunk_delay_ms / 1000 if spec.chunk_delay_ms is not None else knobs[1]
    out.hang = spec.hang
    out.drop_after = spec.drop_after
    out.stall_after = spec.stall_after
    out.trickle_s = spec.trickle_ms / 1000 if spec.trickle_ms is not None else 0.0
    out.gzip = spec.gzip and out.frames is None
    if spec.error_after is not None and out.frames is not None:
        out.error_after = spec.error_after
        out.error_frame = (
            dialect.stream_error_frame(spec.error) if dialect else _generic_error_frame(spec.error)
        )
    return out
