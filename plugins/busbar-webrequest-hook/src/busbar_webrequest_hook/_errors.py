"""The forwarder's error type and the reply-head checks both transports share.

Source: docs/hooks.md#what-a-hook-receives (a non-2xx status is an error, never an abstain).
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from busbar_webrequest_hook._settings import Settings

__all__ = ["ReplyBuffer", "WebRequestError", "check_head", "short"]


class WebRequestError(Exception):
    """A forwarded message failed; ``reason`` is the metric label (``ssrf``, ``connect``,
    ``timeout``, ``status``, ``empty``, ``too_large``, ``too_deep``, ``invalid_json``,
    ``not_object``, ``transport``, ``no_ack``). The message never carries URL userinfo."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


def check_head(status: int, headers: Mapping[str, str], s: Settings, op: str, where: str) -> None:
    """Refuse a reply before its body is read: a non-2xx status, a non-identity encoding, or a
    ``Content-Length`` above ``max_reply_bytes``. Raises :class:`WebRequestError`."""
    if not 200 <= status < 300:
        raise WebRequestError("status", f"{op} to {where}: the sidecar answered HTTP {status} "
                                        f"(an error, never an abstain: a reply rides a 200 body)")
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise WebRequestError("invalid_json", f"{op} to {where}: the reply is {encoding}-encoded; "
                                              f"the forwarder asks for and accepts identity only")
    declared = headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > s.max_reply_bytes:
        raise WebRequestError("too_large", f"{op} to {where}: the reply is {int(declared)} bytes; the "
                                           f"limit is {s.max_reply_bytes} (settings.max_reply_bytes)")


class ReplyBuffer:
    """A reply body read in chunks, refused past ``settings.max_reply_bytes`` (``too_large``) or past
    the exchange's ``deadline`` (``time.monotonic()`` seconds; ``timeout``). Both transports use it."""

    __slots__ = ("buf", "s", "deadline", "op", "where")

    def __init__(self, s: Settings, deadline: float, op: str, where: str) -> None:
        self.buf = bytearray()
        self.s, self.deadline, self.op, self.where = s, deadline, op, where

    def add(self, chunk: bytes) -> None:
        """Append one chunk; raises :class:`WebRequestError` when a limit is passed."""
        self.buf += chunk
        if len(self.buf) > self.s.max_reply_bytes:
            raise WebRequestError("too_large", f"{self.op} to {self.where}: the reply exceeds "
                                               f"{self.s.max_reply_bytes} bytes (settings.max_reply_bytes)")
        if time.monotonic() > self.deadline:
            raise WebRequestError("timeout", f"{self.op} to {self.where}: no complete reply within "
                                             f"{self.s.timeout_s * 1000:.0f} ms (settings.timeout_ms)")

    def value(self) -> bytes:
        """The whole reply."""
        return bytes(self.buf)


def short(exc: BaseException) -> str:
    """The first line of an exception's text, at most 200 characters."""
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]
