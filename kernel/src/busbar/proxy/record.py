"""One data-plane request as the gateway's own bookkeeping sees it: who, where, how long, what it cost.

The data plane (``busbar.server.dataplane``) makes one :class:`RequestRecord` per protocol request and
hangs it on ``call.record``; the walk (``busbar.proxy.engine``) notes every upstream attempt on it;
the data plane stores the reply and, once the reply is fully written (a stream included) or the
client has gone away, calls :meth:`RequestRecord.finish`. That runs every *finisher* registered
with :meth:`RequestRecord.on_finish` exactly once, in registration order, then the process-wide
finishers of ``busbar.server.app.AppState.finishers``: the usage ledger and metering settle there,
the access log and traces write there. A finisher that raises is logged and skipped; it never
reaches the client or the other finishers.

Times are ``time.perf_counter()`` seconds (``started_wall`` is Unix seconds for logs); token counts
are integers (:class:`busbar.ir.model.Usage`). ``usage`` is parsed lazily from a same-protocol
passthrough body the first time a finisher reads it, so a deployment that reads no usage pays
nothing for it.

Source: docs/architecture.md#the-request-record
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from busbar.ir.model import Usage
from busbar.proto.usage_readers import read_usage

if TYPE_CHECKING:
    from busbar.proto.base import Dialect
    from busbar.proxy.relay import Reply

__all__ = ["AttemptNote", "Finisher", "RequestRecord", "new_request_id"]

log = logging.getLogger("busbar")

Finisher = Callable[["RequestRecord"], None]

_PREFIX = os.urandom(4).hex()
_counter = 0


def new_request_id() -> str:
    """A request id unique within this process and, with overwhelming likelihood, across a fleet:
    ``<8 hex chars of this process>-<counter in hex>`` (e.g. ``1f3a9c02-2a``)."""
    global _counter
    _counter += 1
    return f"{_PREFIX}-{_counter:x}"


@dataclass(slots=True)
class AttemptNote:
    """One upstream attempt of the walk (a failover hop is an attempt after the first).

    ``lane``: the lane name; ``pool``: the pool walked (``""`` for a direct route); ``started`` /
    ``ended``: perf_counter seconds (``ended`` is ``None`` while it runs, or until a committed stream
    ends); ``outcome``: ``"ok"``, the failure's disposition class (``server_error``, ``rate_limit``,
    … docs/reliability.md#dispositions), ``"stream_error"`` (failed after the first byte) or
    ``"client_closed"``; ``status``: the upstream HTTP status (0 for a transport failure, ``None``
    while unknown)."""

    lane: str
    pool: str
    started: float
    ended: float | None = None
    outcome: str = ""
    status: int | None = None


class RequestRecord:
    """The bookkeeping of one data-plane request (see the module docstring).

    Attributes:
        request_id: :func:`new_request_id`, for logs and traces (a client's own ``x-request-id``
            is kept in ``client_request_id``).
        client_request_id: the client's ``x-request-id`` header, or ``None``.
        method, path: the HTTP request line's method and path.
        ingress: the ingress dialect name (``openai``, ``anthropic``, …).
        started, started_wall: perf_counter / Unix seconds when the request arrived.
        called: the pool or model name the client asked for (``None`` until read).
        pool: the pool the client named (``None`` for a direct or ad-hoc route, or before routing;
            a hop into a ``fallback_pool`` shows in ``attempts``).
        identity: who the front door identified (``busbar.auth`` ``Identity``), or ``None``.
        stream: whether the reply streams.
        attempts: every upstream attempt, in order.
        lane: the lane that served the reply (``None`` when none did).
        status: the HTTP status sent to the client (0 until known).
        first_byte: perf_counter seconds when the response head was handed to the server.
        ended: perf_counter seconds when the reply was fully written or the client left.
        client_closed: the client went away before the reply was complete.
        stream_ok: a committed stream's end: ``True`` clean, ``False`` failed mid-stream,
            ``None`` not a stream / client left.
        extra: free-form per-request annotations of other subsystems (e.g. a hook's decision);
            keys are the subsystem's name.
    """

    __slots__ = ("request_id", "client_request_id", "method", "path", "ingress", "started", "started_wall",
                 "called", "pool", "identity", "stream", "attempts", "lane", "status", "first_byte", "ended",
                 "client_closed", "stream_ok", "extra", "_usage", "_usage_src", "_finishers", "_finished")

    def __init__(self, method: str, path: str, ingress: str, *, client_request_id: str | None = None,
                 started: float | None = None) -> None:
        self.request_id = new_request_id()
        self.client_request_id = client_request_id
        self.method = method
        self.path = path
        self.ingress = ingress
        self.started = time.perf_counter() if started is None else started
        self.started_wall = time.time()
        self.called: str | None = None
        self.pool: str | None = None
        self.identity: Any = None
        self.stream = False
        self.attempts: list[AttemptNote] = []
        self.lane: str | None = None
        self.status = 0
        self.first_byte: float | None = None
        self.ended: float | None = None
        self.client_closed = False
        self.stream_ok: bool | None = None
        self.extra: dict[str, Any] = {}
        self._usage: Usage | None = None
        self._usage_src: tuple[Dialect, dict[str, Any]] | None = None
        self._finishers: list[Finisher] = []
        self._finished = False

    # ------------------------------------------------------------------ what the walk notes

    def attempt_started(self, lane: str, pool: str) -> AttemptNote:
        """Note a new upstream attempt on ``lane`` (walking ``pool``) and return it for its outcome."""
        note = AttemptNote(lane, pool, time.perf_counter())
        self.attempts.append(note)
        return note

    @property
    def hops(self) -> int:
        """Failover hops: attempts after the first (0 when at most one attempt ran)."""
        return max(0, len(self.attempts) - 1)

    # ------------------------------------------------------------------ what the data plane notes

    def set_reply(self, reply: Reply) -> None:
        """The reply the client gets: its status, usage source and serving lane."""
        self.status = reply.status
        self.stream = reply.stream is not None
        self._usage = reply.usage
        self._usage_src = reply.usage_doc

    @property
    def usage(self) -> Usage:
        """The reply's token usage (a stream's is complete once it ended); zeros when unknown."""
        if self._usage_src is not None:
            dialect, doc = self._usage_src
            self._usage_src = None
            try:
                self._usage = read_usage(dialect, doc)      # the usage object only
            except Exception:
                log.debug("could not read usage from a %s reply", dialect.name, exc_info=True)
                self._usage = Usage()
        if self._usage is None:
            self._usage = Usage()
        return self._usage

    @property
    def outcome(self) -> str:
        """``ok`` (2xx/3xx), ``client_error`` (4xx), ``exhausted`` (503), ``error`` (other 5xx),
        ``client_closed`` (the client left first) or ``stream_error`` (a 200 stream that failed)."""
        if self.client_closed:
            return "client_closed"
        if self.stream_ok is False:
            return "stream_error"
        st = self.status
        if st < 400:
            return "ok"
        if st == 503:
            return "exhausted"
        return "client_error" if st < 500 else "error"

    def ttfb_ms(self) -> float | None:
        """Milliseconds from arrival to the response head, or ``None``."""
        return None if self.first_byte is None else (self.first_byte - self.started) * 1000.0

    def latency_ms(self) -> float | None:
        """Milliseconds from arrival to the end of the reply, or ``None`` while it runs."""
        return None if self.ended is None else (self.ended - self.started) * 1000.0

    # ------------------------------------------------------------------ finishers

    def on_finish(self, fn: Finisher) -> None:
        """Run ``fn(self)`` once when the request ends (immediately if it already has)."""
        if self._finished:
            self._run(fn)
        else:
            self._finishers.append(fn)

    @property
    def finished(self) -> bool:
        """:meth:`finish` has run."""
        return self._finished

    def finish(self, shared: Sequence[Finisher] = ()) -> None:
        """The request is over: stamp ``ended``, run this request's finishers, then ``shared`` (the
        process-wide ones: ``busbar.server.app.AppState.finishers``), each once. Idempotent; never
        raises."""
        if self._finished:
            return
        self._finished = True
        if self.ended is None:
            self.ended = time.perf_counter()
        finishers, self._finishers = self._finishers, []
        for fn in finishers:
            self._run(fn)
        for fn in shared:
            self._run(fn)

    def _run(self, fn: Finisher) -> None:
        try:
            fn(self)
        except Exception:  # a bookkeeping fault must never fail or hide the request it records
            log.exception("request %s: a finisher failed", self.request_id)
