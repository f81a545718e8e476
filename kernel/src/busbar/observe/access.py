"""The access log: one ``busbar.access`` line at ``info`` per data-plane request.

:func:`access_finisher` is a process-wide finisher (``AppState.finishers``) on
``busbar.proxy.record.RequestRecord``; it runs once when the reply is fully written, the stream has
ended or the client has gone away. Nothing is formatted while ``busbar.access`` is below ``info``
(``--log-level warn`` turns the access log off).

Fields (:func:`access_fields`; ``null`` when unknown):

| field | meaning |
|---|---|
| ``ts`` | arrival, ISO-8601 UTC |
| ``request_id`` | busbar's id for the request (``client_request_id``: the caller's ``x-request-id``) |
| ``ingress`` | the caller's protocol (``openai``, ``anthropic``, ...) |
| ``method``, ``path`` | the request line |
| ``model`` | the pool or model name the caller asked for |
| ``pool`` | the pool that routed it (``null``: a direct or ad-hoc route) |
| ``lane`` | the lane that served the reply |
| ``status`` | the HTTP status sent |
| ``outcome`` | ``ok``, ``client_error``, ``exhausted``, ``error``, ``client_closed``, ``stream_error`` |
| ``hops`` | failover hops (attempts after the first) |
| ``ttfb_ms``, ``latency_ms`` | to the response head, to the end of the reply (ms) |
| ``input_tokens``, ``output_tokens`` | the reply's usage |
| ``principal`` | the front door's principal id (key id ``vk_...`` or IdP subject; never a credential) |
| ``stream`` | the reply streamed |

Text line: ``access <status> <outcome> <ingress> model=<m> pool=<p> lane=<l> hops=<n> ttfb_ms=<x>
ms=<y> in=<i> out=<o> principal=<id> id=<request_id>``; with ``--log-format json`` the fields above
are the line's keys (``msg`` is ``"access"``).

Source: docs/operations.md#the-access-log
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from busbar.proxy.record import RequestRecord

__all__ = ["access_fields", "access_finisher"]

log = logging.getLogger("busbar.access")


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def access_fields(record: RequestRecord) -> dict[str, Any]:
    """The access-log fields of a finished ``record`` (see the module docstring)."""
    usage = record.usage
    return {
        "ts": dt.datetime.fromtimestamp(record.started_wall, dt.UTC).isoformat(timespec="milliseconds"),
        "request_id": record.request_id, "client_request_id": record.client_request_id,
        "ingress": record.ingress, "method": record.method, "path": record.path, "model": record.called,
        "pool": record.pool, "lane": record.lane, "status": record.status, "outcome": record.outcome,
        "hops": record.hops, "ttfb_ms": _ms(record.ttfb_ms()), "latency_ms": _ms(record.latency_ms()),
        "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "principal": getattr(record.identity, "principal", None), "stream": record.stream,
    }


def access_finisher(record: RequestRecord) -> None:
    """Log ``record``'s access line (a ``busbar.proxy.record.Finisher``)."""
    if not log.isEnabledFor(logging.INFO):
        return
    f = access_fields(record)
    log.info("access %s %s %s model=%s pool=%s lane=%s hops=%d ttfb_ms=%s ms=%s in=%d out=%d principal=%s id=%s",
             f["status"], f["outcome"], f["ingress"], f["model"] or "-", f["pool"] or "-", f["lane"] or "-",
             f["hops"], _text(f["ttfb_ms"]), _text(f["latency_ms"]), f["input_tokens"], f["output_tokens"],
             f["principal"] or "-", f["request_id"], extra={"fields": f, "json_msg": "access"})


def _text(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.1f}"
