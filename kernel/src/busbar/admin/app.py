"""The admin ASGI app: FastAPI under ``/api/v1/admin``, its own ``/healthz``, one error shape.

``create_admin_app(ctx) -> FastAPI``. In front of everything, ``busbar.admin.guard.AdminGuard``
authenticates each request before its body is read (401) and caps the body (413, 1 MiB). Every
route under the prefix then runs :func:`authorize`: the credential (``Authorization: Bearer`` or
``x-admin-token``) must authenticate (401 ``unauthorized``), the principal's scopes must cover the
route's (403 ``forbidden``; ``busbar.admin.scopes``), and a mutation spends the principal's budget
(429 ``rate_limited``; given back when it is refused as invalid; a revoke is exempt).
An unknown route is a 401 for an unauthenticated caller and a 404 ``not_found`` otherwise; a body
FastAPI cannot parse or validate is a 400 ``invalid_request`` naming the field; anything unexpected
is a 500 ``internal`` whose message never carries the exception. A refused mutation by a known
principal is audited with its error code as the outcome.

Routes: ``busbar.admin.routes_*`` (keys, audit, hooks, plugins, config, meta) and, when present,
the groups and usage routers ``busbar.admin.routes_groups`` / ``routes_usage`` (their ``router``).

Source: docs/admin.md.
"""
from __future__ import annotations

import importlib
import logging
from typing import Any

from busbar_sdk.store import StoreError, StoreUnavailable
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from busbar.admin.context import AdminContext, admin_of
from busbar.admin.errors import AdminError, error_body, error_response
from busbar.admin.guard import UNAUTHORIZED, AdminGuard
from busbar.admin.openapi import ADMIN_API_VERSION, install_openapi
from busbar.admin.principal import Principal, credential_of
from busbar.admin.ratelimit import class_of
from busbar.admin.scopes import PREFIX, covers, required_scope

__all__ = ["OPTIONAL_ROUTERS", "ROUTERS", "authorize", "create_admin_app"]

log = logging.getLogger("busbar.admin")

ROUTERS = ("routes_keys", "routes_audit", "routes_hooks", "routes_plugins", "routes_config", "routes_meta")
#: Routers other modules provide; included when they exist.
OPTIONAL_ROUTERS = ("routes_groups", "routes_usage")


def _route_path(request: Request) -> str | None:
    """The matched route's full template (``/api/v1/admin/keys/{key_id}``), or ``None``. Every router
    is included under :data:`PREFIX`; a route object may carry its path with or without it."""
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    if not isinstance(path, str) or path == "/healthz":
        return None
    return path if path.startswith(PREFIX) else PREFIX + path


async def _principal(request: Request) -> Principal | None:
    """The principal :class:`AdminGuard` authenticated, else the one the credential proves (or ``None``)."""
    known = getattr(request.state, "principal", None)
    if isinstance(known, Principal):
        return known
    return await admin_of(request).auth.authenticate(credential_of(request.headers))


async def authorize(request: Request) -> None:
    """Authenticate, check the route's scope, spend the mutation budget (see the module docstring)."""
    ctx = admin_of(request)
    principal = await _principal(request)
    if principal is None:
        raise AdminError("unauthorized", UNAUTHORIZED, {"WWW-Authenticate": "Bearer"})
    request.state.principal = principal
    route = _route_path(request)
    needed = required_scope(request.method, route)
    if not covers(principal.scopes, needed):
        held = ", ".join(sorted(principal.scopes)) or "no admin scope"
        raise AdminError("forbidden", f"{request.method} {route or request.url.path} needs the '{needed}' admin "
                                      f"scope; this credential holds {held}")
    klass = class_of(route or "")
    if request.method not in ("GET", "HEAD") and klass is not None:
        wait = ctx.limiter.spend(principal.name, klass)
        if wait is not None:
            raise AdminError("rate_limited", f"too many admin changes by '{principal.name}' this minute; retry "
                                             f"in {wait} s", {"Retry-After": str(wait)})
        request.state.spent = (principal.name, klass)


def _refund(request: Request) -> None:
    """Give back the unit :func:`authorize` spent for a mutation refused as invalid."""
    spent = getattr(request.state, "spent", None)
    if spent is not None:
        request.state.spent = None
        admin_of(request).limiter.refund(*spent)


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts)


def _validation_message(exc: RequestValidationError) -> str:
    lines = []
    for err in exc.errors()[:3]:
        kind, loc, msg = err.get("type", ""), tuple(err.get("loc", ())), str(err.get("msg", "invalid"))
        where = _field(loc)
        if kind == "json_invalid":
            lines.append("the body is not valid JSON")
        elif kind == "extra_forbidden":
            lines.append(f"{where}: unknown field; remove it")
        elif not where and kind in ("missing", "model_attributes_type", "dict_type", "model_type"):
            lines.append("a JSON object body is required (content-type: application/json)")
        elif kind == "missing":
            lines.append(f"{where}: required")
        else:
            lines.append(f"{where or 'body'}: {msg}")
    return "; ".join(lines) or "the request is invalid"


def _audit_refusal(request: Request, code: str) -> None:
    principal = getattr(request.state, "principal", None)
    if principal is None or request.method in ("GET", "HEAD") or code in ("unauthorized", "rate_limited"):
        return
    ctx = admin_of(request)
    try:
        ctx.audit.note(f"{request.method} {_route_path(request) or request.url.path}", request.url.path, code,
                       principal.name)
    except RuntimeError:      # no running loop: nothing to record into
        pass


def create_admin_app(ctx: AdminContext | None) -> FastAPI:
    """The admin app over ``ctx`` (see the module docstring; ``None`` builds the routes only, for the
    OpenAPI document)."""
    app = FastAPI(title="Busbar admin API", version=ADMIN_API_VERSION, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.admin = ctx

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> Response:
        return PlainTextResponse("ok")

    @app.exception_handler(AdminError)
    async def on_admin_error(request: Request, exc: AdminError) -> Response:
        if exc.code == "invalid_request":
            _refund(request)
        _audit_refusal(request, exc.code)
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> Response:
        _refund(request)
        _audit_refusal(request, "invalid_request")
        return JSONResponse(error_body("invalid_request", _validation_message(exc)), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        if await _principal(request) is None:
            return error_response(AdminError("unauthorized", UNAUTHORIZED, {"WWW-Authenticate": "Bearer"}))
        if exc.status_code == 405:
            return error_response(AdminError("method_not_allowed", f"{request.method} is not allowed on "
                                                                   f"{request.url.path}"))
        if exc.status_code == 404:
            return error_response(AdminError("not_found", f"no admin route {request.url.path}"))
        return JSONResponse(error_body("invalid_request", str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(StoreError)
    async def on_store(request: Request, exc: StoreError) -> Response:
        what = "the store is unreachable" if isinstance(exc, StoreUnavailable) else "the store refused the change"
        log.error("admin %s %s: store error: %s", request.method, request.url.path, exc)
        return JSONResponse(error_body("internal", f"{what}; see the server log"), status_code=500)

    @app.exception_handler(Exception)
    async def on_crash(request: Request, exc: Exception) -> Response:
        log.error("admin %s %s failed", request.method, request.url.path, exc_info=exc)
        return JSONResponse(error_body("internal", "internal error; see the server log"), status_code=500)

    deps = [Depends(authorize)]
    for name in ROUTERS:
        module = importlib.import_module(f"busbar.admin.{name}")
        app.include_router(module.router, prefix=PREFIX, dependencies=deps)
    for name in OPTIONAL_ROUTERS:
        try:
            module = importlib.import_module(f"busbar.admin.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"busbar.admin.{name}":
                raise
            continue
        app.include_router(module.router, prefix=PREFIX, dependencies=deps)
    install_openapi(app)
    app.add_middleware(AdminGuard)
    return app
