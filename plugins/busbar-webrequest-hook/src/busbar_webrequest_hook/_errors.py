"""The forwarder's error type and the reply-head checks both transports share.

Source: seeds 003 "The wire, precisely" (a non-2xx status is an error, never an abstain).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from busbar_webrequest_hook._settings import Settings

__all__ = ["WebRequestError", "check_head", "short"]


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


def short(exc: BaseException) -> str:
    """The first line of an exception's text, at most 200 characters."""
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]
