"""The data-plane ASGI application: protocol ingress routes on a lean raw-ASGI hot path.

Routes: see ``busbar.server.routes`` (six protocols; a protocol whose dialect is not registered
falls through to a native 404).

Everything else (``GET /healthz``, ``GET /v1/models``, unknown routes) goes to the FastAPI app
(``busbar.server.app``). Every reply of a served request carries ``x-busbar-route-target`` (the lane name,
percent-encoded: ``busbar.modelname.header_value``).
With ``observability.emit_server_timing: true`` every reply carries
``Server-Timing: busbar;dur=<ms>`` (time from the request to the response headers).
Faults answer in the caller's own envelope: malformed JSON 400, a body nested more than
``MAX_JSON_DEPTH`` (128) levels 400 naming the field, a model name from the path with an
empty/``.``/``..`` segment or a control character 400 before any upstream work
(``busbar.modelname``; docs/routing.md#client-chosen-model-names), unknown pool/model 404,
oversized body 413, a request still waiting for its reply when the shutdown drain ends 503
(``busbar.proxy.shutdown``); client-facing text never carries an exception class name
(docs/configuration.md#front-door-connection-limits).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from busbar.auth.chain import FrontDoor
from busbar.auth.identity import Identity
from busbar.modelname import name_fault
from busbar.proto.base import ErrorKind
from busbar.proto.errors import ProtoError
from busbar.proto.registry import get_dialect
from busbar.proxy import shutdown
from busbar.proxy.engine import forward
from busbar.proxy.record import RequestRecord
from busbar.proxy.relay import Reply, error_reply
from busbar.proxy.runtime import Lane, Pool
from busbar.proxy.translate import Call
from busbar.server.asgi_io import read_body, run_cancellable, send_reply
from busbar.server.jsondepth import MAX_JSON_DEPTH, deep_field, too_deep
from busbar.server.ops_dispatch import UPLOADS, not_served, operation_of, serve_operation, upload_of
from busbar.server.routes import Route, match

if TYPE_CHECKING:
    from busbar.proto.base import Dialect
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.operation import Operation
    from busbar.server.app import AppState

log = logging.getLogger("busbar.access")

class DataPlane:
    """ASGI app: serves ingress routes itself, delegates the rest to ``fallback`` (FastAPI)."""

    def __init__(self, state: AppState, fallback: ASGIApp):
        self.state = state          # busbar.server.app.AppState (holds the live Gateway)
        self.fallback = fallback
        self.inflight = 0           # data-plane requests in progress (limits.max_inbound_concurrent)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.fallback(scope, receive, send)
        route = match(scope["method"], scope["path"], scope.get("query_string", b""))
        if route is None:
            if scope["path"] == "/metrics" and self.state.gateway.frontdoor is not None:   # behind auth.chain
                refused = await self.state.gateway.frontdoor.gate(scope)
                if refused is not None:
                    return await send_reply(send, receive, refused)
            return await self.fallback(scope, receive, send)
        try:
            dialect = get_dialect(route.dialect)
        except KeyError:                 # a protocol whose dialect is not in this build
            return await self.fallback(scope, receive, send)
        gw = self.state.gateway
        record = RequestRecord(scope["method"], scope["path"], dialect.name)
        try:
            cap = gw.limits.max_inbound_concurrent
            if cap and self.inflight >= cap:           # shed before buffering the body
                return await self._send(send, receive, record, error_reply(
                    dialect, 503, ErrorKind.OVERLOADED, f"busbar is at its inbound concurrency limit "
                    f"({cap}, limits.max_inbound_concurrent); retry later", {"retry-after": "1"}))
            self.inflight += 1
            try:
                await self._handle(gw, scope, receive, send, dialect, route, record)
            finally:
                self.inflight -= 1
        finally:
            record.finish(self.state.finishers)

    async def _handle(self, gw: Gateway, scope: Scope, receive: Receive, send: Send, dialect: Dialect, route: Route,
                      record: RequestRecord) -> None:
        try:
            raw = await read_body(scope, receive, gw.limits.request_body_max_bytes,
                                  gw.limits.request_body_read_timeout_secs)
        except ProtoError as e:
            return await self._send(send, receive, record, error_reply(dialect, e.status, e.kind, e.message))
        except ConnectionAbortedError:
            record.client_closed = True
            return
        try:
            reply, name = await self._serve(gw, scope, dialect, raw, route, receive, record)
        except asyncio.CancelledError:
            if not shutdown.closing():
                raise
            task = asyncio.current_task()      # the shutdown drain is over: answer, do not cut
            if task is not None:
                task.uncancel()
            reply, name = error_reply(dialect, 503, ErrorKind.OVERLOADED, shutdown.MESSAGE,
                                      {"retry-after": "1"}), None
        except Exception:            # a kernel bug must still answer in the caller's envelope
            log.exception("internal error serving %s %s", scope["method"], scope["path"])
            reply, name = error_reply(dialect, 500, ErrorKind.API_ERROR, "internal gateway error"), None
        if reply is None:            # the client went away; upstream work was cancelled
            record.client_closed = True
            log.info("499 %s %s client closed the request", scope["method"], scope["path"])
            return
        if gw.metrics.enabled:
            gw.metrics.request(dialect.name, name if name in gw.pools else "", _outcome(reply.status))
        if gw.config.observability.emit_server_timing:   # time to response headers, ms
            reply.headers["server-timing"] = f"busbar;dur={(time.perf_counter() - record.started) * 1000:.1f}"
        await self._send(send, receive, record, reply)

    @staticmethod
    async def _send(send: Send, receive: Receive, record: RequestRecord, reply: Reply) -> None:
        """Write ``reply`` and note it on ``record`` (status, usage source, first byte, end)."""
        record.set_reply(reply)
        record.first_byte = time.perf_counter()
        try:
            await send_reply(send, receive, reply)
        finally:
            record.ended = time.perf_counter()
            if reply.stream is not None and record.stream_ok is None and record.attempts \
                    and record.attempts[-1].outcome == "client_closed":
                record.client_closed = True

    async def _serve(self, gw: Gateway, scope: Scope, dialect: Dialect, raw: bytes, route: Route,
                     receive: Receive, record: RequestRecord) -> tuple[Reply | None, str | None]:
        if route.op and (refused := not_served(route, dialect)) is not None:
            return refused, None     # an operation this build does not serve (busbar.server.ops_dispatch)
        wire = raw                   # the body as received (a SigV4 signature covers these bytes)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        identity = None
        if gw.frontdoor is not None:     # auth.chain before the body is parsed: a stranger learns nothing
            verdict = await gw.frontdoor.admit(scope, headers, wire, dialect)
            if not isinstance(verdict, Identity):
                return verdict, None
            identity = verdict
        op: Operation | Reply | None
        if route.op in UPLOADS:      # a multipart audio upload, not JSON (busbar.server.ops_dispatch)
            upload = upload_of(route, dialect, raw, scope["headers"])
            if isinstance(upload, Reply):
                return upload, None
            body, op = upload
        else:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                if str(e).startswith("depth limit exceeded"):       # orjson's own cap (1024 levels)
                    return _too_deep(dialect, ""), None
                return error_reply(dialect, 400, ErrorKind.INVALID_REQUEST,
                                   f"request body is not valid JSON: {e}"), None
            if not isinstance(body, dict):
                return error_reply(dialect, 400, ErrorKind.INVALID_REQUEST,
                                   "request body must be a JSON object"), None
            if too_deep(body, raw):
                return _too_deep(dialect, deep_field(body)), None
            op = operation_of(route, dialect, body) if route.op else None   # embeddings & co.
            if isinstance(op, Reply):
                return op, None
            try:                     # one spelling on every hop (Gemini snake_case, countTokens form)
                normal = dialect.normalize_request(body, route.method)
            except ProtoError as e:
                return error_reply(dialect, e.status, e.kind, e.message), None
            if normal is not body:
                body, raw = normal, orjson.dumps(normal)
        name = route.name if route.name is not None else body.get("model")
        adhoc_provider = route.adhoc_provider
        if name is None or name == "":
            return error_reply(dialect, 400, ErrorKind.INVALID_REQUEST,
                               "'model' is required: name a pool or a model"), None
        if not isinstance(name, str):
            return error_reply(dialect, 400, ErrorKind.INVALID_REQUEST,
                               f"'model' must be a string naming a pool or a model, not "
                               f"{type(name).__name__}"), None
        if route.name is not None:       # a name from the path: one segment, printable (it may reach a URL)
            fault = name_fault(name)
            if fault is not None:
                return error_reply(dialect, 400, ErrorKind.INVALID_REQUEST, fault), None
        record.called = name             # the access log names what was asked for, a 404 included
        if identity is not None:         # the pool grant before any lookup: no pool names leak
            refused = FrontDoor.grant(identity, dialect, adhoc_provider or name, adhoc_provider is not None)
            if refused is not None:
                return refused, name
        target: Pool | Lane | None
        if adhoc_provider is not None:
            target = gw.adhoc_lane(adhoc_provider, name)
            if target is None:
                return error_reply(dialect, 404, ErrorKind.NOT_FOUND,
                                   f"provider '{adhoc_provider}' is not configured"), None
        else:
            target = gw.target(name)
            if target is None:
                return error_reply(dialect, 404, ErrorKind.NOT_FOUND,
                                   f"the model '{name}' does not exist: no pool or model of that name "
                                   f"is configured"), None
        stream = route.stream if route.stream is not None else body.get("stream") is True
        call = Call(dialect, body, raw, stream, headers, name, route.shims)
        call.record = record
        record.client_request_id = headers.get("x-request-id")
        if isinstance(target, Pool):
            record.pool = target.name
        record.identity = identity
        if op is not None:           # a non-chat operation (busbar.server.ops_dispatch)
            call.op = op
            return await serve_operation(gw, call, target, receive), name
        try:
            if _needs_ir_check(call, target):
                call.ir  # noqa: B018 - evaluating the property validates the body's shape before any upstream work
        except ProtoError as e:
            return error_reply(dialect, e.status, e.kind, e.message), None
        except Exception:        # the reader only consumes the client's body: a shape it did not expect
            log.warning("malformed %s request body", dialect.name, exc_info=True)
            return error_reply(dialect, 400, ErrorKind.INVALID_REQUEST,
                               f"malformed request body: a field has the wrong type or shape; check the "
                               f"body against the {dialect.name} request format"), None
        if gw.limiter is not None:          # groups and the rate card: admit, then settle at the end
            return await gw.limiter.serve(gw, call, target,
                                          lambda t: run_cancellable(receive, forward(gw, call, t))), name
        return await run_cancellable(receive, forward(gw, call, target)), name


def _too_deep(dialect: Dialect, field: str) -> Reply:
    where = f"'{field}'" if field else "the request body"
    return error_reply(dialect, 400, ErrorKind.INVALID_REQUEST,
                       f"{where} nests JSON arrays/objects more than {MAX_JSON_DEPTH} levels deep "
                       f"(the limit); flatten it")


def _outcome(status: int) -> str:
    if status < 400:
        return "ok"
    if status == 503:
        return "exhausted"
    return "client_error" if status < 500 else "error"


def _needs_ir_check(call: Call, target: Pool | Lane) -> bool:
    """Cross-protocol targets and re-framed replies (Gemini's JSON-array stream) need the IR anyway;
    parse it up front so a bad body is a clean 400, never a failure after the upstream call."""
    if call.reencode:
        return True
    if isinstance(target, Pool):
        return any(m.lane.provider.dialect is not call.ingress for m in target.members)
    return target.provider.dialect is not call.ingress
