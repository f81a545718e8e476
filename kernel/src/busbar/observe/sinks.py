"""Per-request log sinks: the request-log webhook and the JSONL request-log file.

Both are process-wide ``RequestRecord`` finishers built at boot by :func:`build_sinks` from
``observability:`` and write the same JSON document per completed request (:func:`request_doc`):

``{"ts": <Unix seconds>, "ingress_protocol", "pool", "outcome", "latency_ms"}`` (the seeds' fields)
plus ``"model"`` (the name asked for), ``"lane"``, ``"status"``, ``"hops"``, ``"input_tokens"``,
``"output_tokens"``, ``"request_id"``. ``pool`` / ``lane`` are ``null`` when none applied; no
credential, prompt or completion is ever part of it.

- **Webhook** (``request_log_webhook_url``): a fire-and-forget ``POST`` of the document as JSON.
  ``https://`` only, SSRF-guarded at configuration time and again at connect time (every resolved
  address; ``busbar.security.connector``), redirects never followed. At most
  ``max_inflight_webhook_deliveries`` deliveries in flight; past that a document is dropped, never
  queued. Each delivery is bounded by ``webhook_delivery_timeout_secs``. Drops and failed deliveries
  are counted (``busbar_request_log_webhook_dropped_total{reason=overflow|failed}`` with a
  ``metrics:`` block) and logged at most once a minute.
- **File** (``request_log_file``, Busbar (Python) extension): one JSON line per request appended to
  the file; at ``request_log_rotate_mb`` MiB it is rotated to ``<path>.1`` … ``<path>.5``
  (``logging.handlers.RotatingFileHandler``).

Source: docs/operations.md#request-log-sinks
"""
from __future__ import annotations

import asyncio
import logging
import logging.handlers
import time
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import aiohttp

    from busbar.config.load import LoadedConfig
    from busbar.proxy.metrics import NullMetrics
    from busbar.proxy.record import RequestRecord

__all__ = ["FileSink", "WebhookSink", "build_sinks", "request_doc"]

log = logging.getLogger("busbar.requestlog")
ROTATE_KEEP = 5
"""Rotated request-log files kept (``<path>.1`` … ``<path>.5``)."""
_WARN_EVERY_S = 60.0


def request_doc(record: RequestRecord) -> dict[str, Any]:
    """The per-request document both sinks write (see the module docstring)."""
    usage = record.usage
    latency = record.latency_ms()
    return {"ts": round(record.started_wall, 3), "ingress_protocol": record.ingress, "pool": record.pool,
            "outcome": record.outcome, "latency_ms": None if latency is None else round(latency, 1),
            "model": record.called, "lane": record.lane, "status": record.status, "hops": record.hops,
            "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "request_id": record.request_id}


class WebhookSink:
    """The request-log webhook (see the module docstring).

    Args:
        url: ``observability.request_log_webhook_url`` (already validated).
        loaded: the config (``security:`` for the SSRF guard, the two tuning keys).
        metrics: the gateway's metrics (drops are counted when it has a registry).
    """

    def __init__(self, url: str, loaded: LoadedConfig, metrics: NullMetrics) -> None:
        obs = loaded.config.observability
        self.url = url
        self.max_inflight = obs.max_inflight_webhook_deliveries
        self.timeout_s = float(obs.webhook_delivery_timeout_secs)
        self.inflight = 0
        self.dropped = {"overflow": 0, "failed": 0}
        self._loaded = loaded
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._warned = 0.0
        self._counter = None
        registry = getattr(metrics, "registry", None)
        if registry is not None:
            from prometheus_client import Counter

            self._counter = Counter("busbar_request_log_webhook_dropped", "Request-log webhook documents dropped",
                                    ["reason"], registry=registry)

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp
        from busbar_sdk.ssrf import HostGuard

        from busbar.security.connector import guarded_connector
        from busbar.security.ssrf import policy_of

        sec = self._loaded.config.security
        policy = policy_of(sec)
        guard = HostGuard(policy, purpose="observability.request_log_webhook_url", allow_private=False,
                          require_https=True)
        return aiohttp.ClientSession(connector=guarded_connector(guard, max_idle_per_host=8, idle_timeout_s=60),
                                     timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    def _drop(self, reason: str, detail: str = "") -> None:
        self.dropped[reason] += 1
        if self._counter is not None:
            self._counter.labels(reason).inc()
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY_S:
            self._warned = now
            log.warning("request-log webhook: dropped a document (%s%s); %d overflow, %d failed so far", reason,
                        f": {detail}" if detail else "", self.dropped["overflow"], self.dropped["failed"])

    def finisher(self, record: RequestRecord) -> None:
        """Send ``record``'s document without waiting (a ``busbar.proxy.record.Finisher``)."""
        if self.inflight >= self.max_inflight:
            self._drop("overflow")
            return
        body = orjson.dumps(request_doc(record))
        self.inflight += 1
        task = asyncio.get_running_loop().create_task(self._deliver(body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, body: bytes) -> None:
        try:
            if self._session is None:
                self._session = self._open()
            async with self._session.post(self.url, data=body, allow_redirects=False,
                                          headers={"content-type": "application/json"}) as resp:
                await resp.read()
                if resp.status >= 300:
                    self._drop("failed", f"HTTP {resp.status}")
        except Exception as e:  # noqa: BLE001 - a collector fault never reaches a request
            self._drop("failed", type(e).__name__ if not str(e) else str(e))
        finally:
            self.inflight -= 1

    async def aclose(self, timeout_s: float = 2.0) -> None:
        """Wait up to ``timeout_s`` for deliveries in flight, then close the client (shutdown)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)
        if self._session is not None:
            await self._session.close()


class FileSink:
    """The JSONL request-log file with size rotation (see the module docstring); ``max_bytes``: the size
    at which the file rotates (``request_log_rotate_mb`` MiB)."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self._handler = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes,
                                                             backupCount=ROTATE_KEEP, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def finisher(self, record: RequestRecord) -> None:
        """Append ``record``'s document as one line (a ``busbar.proxy.record.Finisher``)."""
        line = orjson.dumps(request_doc(record)).decode()
        self._handler.emit(logging.LogRecord("busbar.requestlog", logging.INFO, "", 0, line, None, None))

    def close(self) -> None:
        """Flush and close the file (shutdown)."""
        self._handler.close()


def build_sinks(loaded: LoadedConfig, metrics: NullMetrics) -> tuple[WebhookSink | None, FileSink | None]:
    """The sinks ``observability:`` asks for (``None`` for each one it does not)."""
    obs = loaded.config.observability
    hook = WebhookSink(obs.request_log_webhook_url, loaded, metrics) if obs.request_log_webhook_url else None
    path = obs.request_log_file
    file = FileSink(path, obs.request_log_rotate_mb * 1024 * 1024) if path else None
    return hook, file
