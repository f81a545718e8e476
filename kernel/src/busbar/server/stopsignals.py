"""A stop signal (``SIGINT``/``SIGTERM``) that arrives before the server can act on it.

``busbar`` installs :func:`hold` as soon as it knows it will serve (``busbar.cli``), and each
``--workers`` worker does right after its fork: from then on a stop signal is recorded instead of
killing the process half-booted (or being ignored). ``busbar.server.lifecycle.run`` installs its own
handler before it serves and then asks :func:`take` whether a stop came first; if so the listener
shuts down as soon as it is up, through the same drain, final snapshot and store flush as a later
``SIGTERM``, and the process exits 0. A second ``SIGINT`` before that interrupts the boot
(``KeyboardInterrupt``), as Ctrl+C did before.

Source: docs/operations.md#stopping
"""
from __future__ import annotations

import signal
from types import FrameType

__all__ = ["STOP_SIGNALS", "hold", "take"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_pending: list[int] = []


def _record(sig: int, frame: FrameType | None) -> None:
    if sig == signal.SIGINT and signal.SIGINT in _pending:
        signal.default_int_handler(sig, frame)         # a second Ctrl+C: stop waiting for the boot
    _pending.append(sig)


def hold() -> None:
    """Record ``SIGINT``/``SIGTERM`` from now on (main thread only); forgets any recorded before."""
    _pending.clear()
    for sig in STOP_SIGNALS:
        signal.signal(sig, _record)


def take() -> bool:
    """Whether a stop signal was recorded since :func:`hold`; clears the record."""
    got = bool(_pending)
    _pending.clear()
    return got
