"""Locate, load and frame the wire captures shipped with this package (``busbar_mock_provider/fixtures``).

What lives here: the fixtures directory default and override, a byte cache, the content type a
capture is served with, the HTTP status encoded in an error capture's name, and the splitting of a
stream capture into the frames the mock writes one by one (SSE events, Bedrock eventstream frames,
decoded ``chunks.jsonl`` lines re-framed as SSE).

What must not: protocol knowledge beyond file naming (that lives in the per-protocol modules).

Source: ``busbar_mock_provider/fixtures/README.md`` (naming conventions and provenance of every capture).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "ENV_FIXTURES",
    "PACKAGED_FIXTURES",
    "FixtureError",
    "FixtureStore",
    "default_fixtures_dir",
    "split_eventstream",
    "split_sse",
]

ENV_FIXTURES = "BUSBAR_MOCK_FIXTURES"

#: The captures shipped as package data (see ``fixtures/README.md`` for each file's provenance).
PACKAGED_FIXTURES = Path(__file__).resolve().parent / "fixtures"

_SSE_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_ERROR_NAME = re.compile(r"(?:^|/)error-(\d{3})-[^/]*$")


class FixtureError(ValueError):
    """A fixture path that is unsafe, missing or unreadable (message names the path)."""


def default_fixtures_dir() -> Path:
    """Return the fixtures directory: env ``BUSBAR_MOCK_FIXTURES``, else the packaged captures.

    Returns:
        ``Path(os.environ["BUSBAR_MOCK_FIXTURES"])`` when set and non-empty, else
        :data:`PACKAGED_FIXTURES` (``busbar_mock_provider/fixtures``).
    """
    env = os.environ.get(ENV_FIXTURES)
    if env:
        return Path(env)
    return PACKAGED_FIXTURES


def content_type_for(rel: str) -> str:
    """Content type a capture is served with, from its file name (``*.sse.txt`` -> SSE, ...)."""
    if rel.endswith(".sse.txt") or rel.endswith(".chunks.jsonl"):
        return "text/event-stream; charset=utf-8"
    if rel.endswith(".eventstream"):
        return "application/vnd.amazon.eventstream"
    if rel.endswith(".json"):
        return "application/json"
    return "text/plain; charset=utf-8"


def status_for(rel: str) -> int:
    """HTTP status of a capture: ``error-<status>-*.json`` names carry it; everything else is 200."""
    m = _ERROR_NAME.search(rel)
    return int(m.group(1)) if m else 200


def is_stream(rel: str) -> bool:
    """True when the capture is a stream body that the mock writes frame by frame."""
    return rel.endswith((".sse.txt", ".chunks.jsonl", ".eventstream"))


def split_sse(raw: bytes) -> list[bytes]:
    """Split an SSE body into events, each keeping its own blank-line terminator.

    Bytes after the last terminator (an unterminated tail) become a final frame of their own.
    """
    frames: list[bytes] = []
    pos = 0
    for m in _SSE_EVENT_END.finditer(raw):
        frames.append(raw[pos : m.end()])
        pos = m.end()
    if pos < len(raw):
        frames.append(raw[pos:])
    return frames


def split_eventstream(raw: bytes) -> list[bytes]:
    """Split an ``application/vnd.amazon.eventstream`` body into frames by each prelude's total length.

    Raises:
        FixtureError: a prelude announces a length that runs past the end of the body.
    """
    frames: list[bytes] = []
    pos = 0
    while pos < len(raw):
        if len(raw) - pos < 12:
            raise FixtureError(f"eventstream: truncated prelude at byte {pos}")
        total = int.from_bytes(raw[pos : pos + 4], "big")
        if total < 16 or pos + total > len(raw):
            raise FixtureError(f"eventstream: frame at byte {pos} announces {total} bytes")
        frames.append(raw[pos : pos + total])
        pos += total
    return frames


class FixtureStore:
    """Read-only view of one fixtures directory with a byte cache.

    Args:
        root: the fixtures directory (see :func:`default_fixtures_dir`).
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._cache: dict[str, bytes] = {}

    def resolve(self, rel: str) -> Path:
        """Map a relative fixture name to a file inside the root.

        Raises:
            FixtureError: the name escapes the root, or no such file exists.
        """
        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.root):
            raise FixtureError(f"fixture {rel!r}: resolves outside {self.root}")
        if not path.is_file():
            raise FixtureError(f"fixture {rel!r}: no such file under {self.root}")
        return path

    def read(self, rel: str) -> bytes:
        """Return the raw bytes of a capture (cached after the first read).

        Raises:
            FixtureError: see :meth:`resolve`.
        """
        data = self._cache.get(rel)
        if data is None:
            data = self.resolve(rel).read_bytes()
            self._cache[rel] = data
        return data

    def read_or(self, rel: str, fallback: bytes) -> bytes:
        """Return a capture's bytes, or ``fallback`` when the fixtures directory lacks it."""
        try:
            return self.read(rel)
        except (FixtureError, OSError):
            return fallback

    def frames(self, rel: str) -> list[bytes]:
        """Return a stream capture as the list of frames to write (SSE events or eventstream frames).

        ``*.chunks.jsonl`` holds decoded ``data:`` payloads, one a line; each is re-framed as
        ``data: <line>\\n\\n``.
        """
        raw = self.read(rel)
        if rel.endswith(".eventstream"):
            return split_eventstream(raw)
        if rel.endswith(".chunks.jsonl"):
            return [b"data: " + line.strip() + b"\n\n" for line in raw.splitlines() if line.strip()]
        return split_sse(raw)
