"""The ASGI application: the raw data plane in front of a FastAPI app for the other routes.

``create_app(state) -> ASGI app``. ``AppState.gateway`` is the live ``Gateway``; swapping it is
how a reload applies (the data plane reads it per request).

FastAPI routes: ``GET /healthz`` (``ok`` / 503 ``no usable lanes``: any lane usable in any cell;
``?pool=<name>``: ``ok`` / 503 ``no usable lanes in pool '<name>'`` (no member usable in that pool's
cells) / 404 ``no pool named '<name>'``; reads never take a breaker probe), ``GET /v1/models``
(OpenAI list shape: pools then models); with an ``auth.chain`` ``?pool=`` and ``/v1/models`` need
an identified caller and show only what it may use (``busbar.auth.catalog``), ``GET /stats``
(per-lane JSON snapshot scoped to the caller's allowed pools: ``busbar.server.stats``), and a
catch-all that answers unknown routes with a native-envelope 404 (Anthropic shape under
``/v1/messages`` paths, else OpenAI's).

Source: docs/configuration.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from busbar import __version__
from busbar.auth.catalog import pool_health_refusal, visible_names
from busbar.proto.base import ErrorKind
from busbar.proto.registry import get_dialect
from busbar.server.dataplane import DataPlane
from busbar.server.routes import dialect_for_unknown, match
from busbar.server.stats import stats_reply

if TYPE_CHECKING:
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.record import Finisher
    from busbar.server.apply import ConfigApplier


@dataclass
class AppState:
    """What the data plane reads per request. ``gateway``: the live ``Gateway`` (a reload swaps it);
    ``started_at``: Unix seconds; ``finishers``: process-wide request finishers, run once at the end
    of every data-plane request after its own (``busbar.proxy.record``; e.g. the access log)."""

    gateway: Gateway
    started_at: float = 0.0
    finishers: list[Finisher] = field(default_factory=list)
    applier: ConfigApplier | None = None      # live config apply (busbar.server.apply), set by the lifecycle


def create_app(state: AppState) -> DataPlane:
    """Build the data-plane ASGI app around ``state``."""
    api = FastAPI(title="Busbar", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)

    @api.get("/healthz")
    async def healthz(request: Request, pool: str | None = None) -> Response:
        if pool is None:
            if state.gateway.any_usable():
                return PlainTextResponse("ok")
            return PlainTextResponse("no usable lanes", status_code=503)
        if (refused := await pool_health_refusal(state.gateway, request.scope, pool)) is not None:
            return Response(refused.body, status_code=refused.status, headers=refused.headers)
        usable = state.gateway.pool_usable(pool)
        if usable is None:
            return PlainTextResponse(f"no pool named '{pool}'", status_code=404)
        if usable:
            return PlainTextResponse("ok")
        return PlainTextResponse(f"no usable lanes in pool '{pool}'", status_code=503)

    @api.get("/metrics")
    async def metrics() -> Response:
        m = state.gateway.metrics
        if not m.enabled:
            dialect = get_dialect("openai")
            st, headers, body = dialect.error_response(404, ErrorKind.NOT_FOUND,
                                                       "metrics are disabled: add a metrics: block")
            return Response(body, status_code=st, headers=headers)
        return Response(m.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @api.get("/stats")
    async def stats(request: Request) -> Response:        # per-lane snapshot (busbar.server.stats)
        reply = await stats_reply(state, request.headers)
        return Response(reply.body, status_code=reply.status, headers=reply.headers)

    @api.get("/v1/models")
    async def models(request: Request) -> Response:       # behind auth.chain (busbar.auth.catalog)
        names = await visible_names(state.gateway, request.scope)
        if not isinstance(names, list):
            return Response(names.body, status_code=names.status, headers=names.headers)
        created = int(state.started_at or time.time())
        data = [{"id": n, "object": "model", "created": created, "owned_by": "busbar"} for n in names]
        return JSONResponse({"object": "list", "data": data})

    @api.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS",
                                            "TRACE"])
    async def not_found(path: str, request: Request) -> Response:
        try:
            dialect = get_dialect(dialect_for_unknown("/" + path))
        except KeyError:
            dialect = get_dialect("openai")
        if match("POST", "/" + path) is not None:          # a protocol route, wrong method
            st, headers, body = dialect.error_response(
                405, ErrorKind.INVALID_REQUEST, f"method {request.method} not allowed on /{path}; use POST")
            return Response(body, status_code=st, headers={**headers, "allow": "POST"})
        st, headers, body = dialect.error_response(404, ErrorKind.NOT_FOUND,
                                                   f"no route for {request.method} /{path}")
        return Response(body, status_code=st, headers=headers)

    return DataPlane(state, api)
