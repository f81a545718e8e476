"""The OTLP/HTTP trace exporter's queue and thread: the request path only appends a finished request
to a bounded queue (:meth:`Exporter.put`: never blocks; a full queue drops the request's trace and
counts it); a daemon thread takes up to :data:`BATCH` requests at a time, every
:data:`DELAY_S` seconds or as soon as a batch is full, encodes them (``busbar.observe.otlp.encode``)
and POSTs the protobuf to the collector.

Delivery: ``POST <url>`` with ``content-type: application/x-protobuf`` and the configured headers
(the ``Authorization`` made from the URL's userinfo), through the caller's ``requests`` session (the
SSRF-guarded one of ``busbar.security.sync_session``); :data:`TIMEOUT_S` seconds per batch in all.
A 2xx/3xx answer is success; 429, 502, 503, 504 and connection errors are retried with exponential
backoff (1, 2, 4, ... s, ±20 % jitter, or the collector's ``Retry-After`` seconds) within that
deadline, at most :data:`RETRIES` tries, and never once shutdown has begun; any other answer, an
exhausted deadline, and a connection the SSRF guard refused (``SsrfBlocked``, never retried) drop
the batch, counted per request in :attr:`Exporter.dropped` under ``export_failed`` and logged at
most once a minute. :meth:`Exporter.close` stops the thread after it has sent what is queued.

Source: docs/operations.md#traces-otlp
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import requests

    from busbar.ir.model import Usage
    from busbar.proxy.record import RequestRecord

__all__ = ["BATCH", "DELAY_S", "QUEUE", "RETRIES", "TIMEOUT_S", "Attempt", "Exporter", "Hook", "Item", "item"]

log = logging.getLogger("busbar.traces")

QUEUE = 2048
"""Finished requests waiting for export at most; one more is dropped (``queue_full``)."""
BATCH = 512
"""Requests per export request at most."""
DELAY_S = 1.0
"""Seconds a queued request waits for a batch to fill at most."""
TIMEOUT_S = 10.0
"""Seconds one batch may take, retries included."""
RETRIES = 6
"""Tries per batch at most."""
_RETRYABLE = frozenset({429, 502, 503, 504})
_WARN_EVERY_S = 60.0


#: One upstream attempt: ``(lane, pool, started, ended, outcome, status)`` (perf_counter seconds;
#: ``ended`` / ``status`` ``None`` while unknown).
Attempt = tuple[str, str, float, "float | None", str, "int | None"]
#: One gate decision: ``(hook, started, ended, verdict)`` (perf_counter seconds).
Hook = tuple[str, "float | None", "float | None", str]
#: One finished request waiting for export (:func:`item`): ``(request_id, called, pool, lane, ingress,
#: status, outcome, started_wall, started, ended, input_tokens, output_tokens, attempts, hooks,
#: provider, upstream_model)``. A plain tuple of strings, numbers and ``None`` (and tuples of those),
#: so the garbage collector stops tracking it at its first scan: a queue of them adds nothing to the
#: full collections a queue of request records would lengthen (the heap is frozen at boot, so every
#: object that outlives a young collection counts towards the next full one).
Item = tuple[str, str, "str | None", "str | None", str, int, str, float, float, "float | None", int, int,
             tuple[Attempt, ...], tuple[Hook, ...], "str | None", "str | None"]


def item(record: RequestRecord, usage: Usage, provider: str | None, upstream_model: str | None) -> Item:
    """The :data:`Item` of a finished ``record`` with its ``usage`` and the serving lane's provider
    protocol and upstream model (``None`` when no lane served it)."""
    return (record.request_id, record.called or "", record.pool, record.lane, record.ingress, record.status,
            record.outcome, record.started_wall, record.started, record.ended, usage.input_tokens,
            usage.output_tokens,
            tuple([(n.lane, n.pool, n.started, n.ended, n.outcome, n.status) for n in record.attempts]),
            tuple([(str(d.get("hook", "")), d.get("started"), d.get("ended"), str(d.get("verdict", "")))
                   for d in record.extra.get("hook_decisions", ())]),
            provider, upstream_model)


#: ``(requests, now in Unix ns) -> serialized ExportTraceServiceRequest``
Encoder = Callable[[Sequence[Item], int], bytes]


class Exporter:
    """A bounded queue of finished requests and the thread that exports them.

    ``url``: the collector's traces endpoint (no userinfo); ``headers``: sent with every POST;
    ``session``: the HTTP client (closed by :meth:`close`); ``encode``: turns a batch into the request body; ``queue``,
    ``batch``, ``delay_s``, ``timeout_s``: see the module constants. ``dropped``:
    ``{"queue_full": n, "export_failed": n}``, requests whose spans were never delivered.
    """

    def __init__(self, url: str, headers: Mapping[str, str], session: requests.Session, encode: Encoder, *,
                 queue: int = QUEUE, batch: int = BATCH, delay_s: float = DELAY_S,
                 timeout_s: float = TIMEOUT_S) -> None:
        self.url = url
        self.headers = {"content-type": "application/x-protobuf", **headers}
        self.session = session
        self.encode = encode
        self.limit, self.batch, self.delay_s, self.timeout_s = queue, batch, delay_s, timeout_s
        self.dropped = {"queue_full": 0, "export_failed": 0}
        self._queue: deque[Item] = deque()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._send_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._warned = {"queue_full": -_WARN_EVERY_S, "export_failed": -_WARN_EVERY_S}

    # ------------------------------------------------------------------ the request path

    def put(self, item: Item) -> None:
        """Queue one finished request; when :attr:`limit` are already queued, drop it and count it
        (``queue_full``). Never blocks; safe from any thread."""
        q = self._queue
        n = len(q)
        if n >= self.limit:
            self._drop("queue_full", 1)
            return
        q.append(item)
        if n + 1 == self.batch:
            self._wake.set()

    # ------------------------------------------------------------------ the export thread

    def start(self) -> None:
        """Start the export thread (once; a daemon, so it never holds the process open)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="busbar-otlp", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._closing.is_set():
            self._wake.wait(self.delay_s)
            self._wake.clear()
            try:
                self.flush()
            except Exception:           # the thread must outlive any one batch's fault
                log.exception("observability.otlp_url: exporting a span batch failed")

    def flush(self) -> None:
        """Export everything queued now, batch by batch, on the calling thread (the export thread
        calls it; :meth:`close` calls it once more)."""
        with self._send_lock:
            q = self._queue
            while q:
                items = [q.popleft() for _ in range(min(self.batch, len(q)))]
                try:
                    body = self.encode(items, time.time_ns())
                except Exception:
                    log.exception("observability.otlp_url: could not encode %d request(s); dropped", len(items))
                    self._drop("export_failed", len(items))
                    continue
                if not self._send(body):
                    self._drop("export_failed", len(items))

    def _send(self, body: bytes) -> bool:
        """POST one batch with the retry rule of the module docstring; ``True`` once delivered."""
        import requests
        from busbar_sdk.ssrf import SsrfBlocked

        deadline = time.monotonic() + self.timeout_s
        for attempt in range(RETRIES):
            backoff = 2.0 ** attempt * random.uniform(0.8, 1.2)
            try:
                resp = self.session.post(self.url, data=body, headers=self.headers,
                                         timeout=max(deadline - time.monotonic(), 0.001))
            except SsrfBlocked:
                return False                 # counted and logged by the session's on_refused
            except requests.ConnectionError as e:
                reason = f"connection error ({type(e).__name__})"
            except requests.RequestException as e:     # a timeout, a malformed answer: not retried
                self._note_failure(type(e).__name__)
                return False
            else:
                status = resp.status_code
                resp.close()
                if status < 400:
                    return True
                if status not in _RETRYABLE:
                    self._note_failure(f"HTTP {status}")
                    return False
                reason = f"HTTP {status}"
                retry_after = resp.headers.get("retry-after", "")
                if retry_after.isdigit():
                    backoff = float(retry_after)
            if attempt + 1 == RETRIES or backoff > deadline - time.monotonic() or self._closing.is_set():
                self._note_failure(reason)
                return False
            self._closing.wait(backoff)
        return False                                              # pragma: no cover - the loop returns

    def _note_failure(self, reason: str) -> None:
        now = time.monotonic()
        if now - self._warned["export_failed"] >= _WARN_EVERY_S:
            self._warned["export_failed"] = now
            log.warning("observability.otlp_url: a span batch was not delivered (%s); dropped", reason)

    def _drop(self, reason: str, n: int) -> None:
        self.dropped[reason] += n
        if reason == "queue_full":
            now = time.monotonic()
            if now - self._warned[reason] >= _WARN_EVERY_S:
                self._warned[reason] = now
                log.warning("observability.otlp_url: %d finished requests queued for export; traces dropped "
                            "(%d so far)", self.limit, self.dropped[reason])

    def close(self, timeout_s: float | None = None) -> None:
        """Stop the export thread, send what is still queued (retries are not waited for once
        closing) and close the session; waits at most ``timeout_s`` seconds (default:
        :attr:`timeout_s` + 5) for a batch in flight."""
        self._closing.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(self.timeout_s + 5.0 if timeout_s is None else timeout_s)
        if thread is None or not thread.is_alive():
            self.flush()
            self.session.close()
