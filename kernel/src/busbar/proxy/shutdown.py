"""Whether the process is past its shutdown drain: read on the request path, set by the listener.

After ``SIGTERM`` the listener stops accepting and lets requests in flight finish for the drain time
(``busbar.server.listener.ListenerServer``, docs/operations.md#stopping). Past it, :func:`begin_close`
is called and the requests still running are cancelled: a committed stream then ends with its
protocol's in-band error frame carrying :data:`MESSAGE` (``busbar.proxy.relay``) and a request
whose reply has not started is answered 503 with :data:`MESSAGE` in its protocol's envelope
(``busbar.server.dataplane``), instead of a cut connection.
"""
from __future__ import annotations

__all__ = ["MESSAGE", "begin_close", "closing"]

MESSAGE = "busbar is shutting down; retry the request"
"""The error text a request cut by the shutdown gets."""

_closing = False


def closing() -> bool:
    """True once the drain time is over and in-flight requests are being cut."""
    return _closing


def begin_close() -> None:
    """Mark the drain as over (called once, by the listener, just before it cancels requests)."""
    global _closing
    _closing = True
