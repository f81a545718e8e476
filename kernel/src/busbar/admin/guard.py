"""The admin app's front: authenticate before any body is read, then cap the body.

``AdminGuard(app, max_body_bytes=MAX_BODY_BYTES)`` is pure ASGI middleware around the admin FastAPI
app (``busbar.admin.app``). For every HTTP request except ``GET /healthz``:

0. in open mode (``auth.admin_auth: []``, no credential at all) a browser is the remaining attacker:
   a hostile page reaching the listener through DNS rebinding sends its own name as ``Host``, and a
   cross-site page sends its ``Origin``. So the request's ``Host`` (when sent) must name ``localhost``,
   a loopback literal or the ``admin_listen`` host, else ``403 forbidden`` (:data:`OPEN_HOST_REFUSED`);
   an ``Origin`` must name this listener (``http(s)://<Host>``) and ``Sec-Fetch-Site`` may not be
   ``cross-site`` / ``same-site``, else ``403 forbidden`` (:data:`OPEN_ORIGIN_REFUSED`). Both before
   any body is read (``connection: close`` when one was announced);
1. the credential (``busbar.admin.principal.credential_of``) must authenticate, else ``401
   unauthorized`` before one byte of the body is read (the reply carries ``connection: close`` when a
   body was announced, so the rest of it is never read either); the principal is kept in
   ``scope["state"]["principal"]`` for ``busbar.admin.app.authorize``;
2. the body may hold at most ``max_body_bytes`` (:data:`MAX_BODY_BYTES`, 1 MiB): a larger
   ``Content-Length`` is refused before reading, a chunked body as soon as it passes the cap, with
   ``413 payload_too_large`` in the admin error shape and ``connection: close``. A body within the
   cap is read whole and handed to the app.

Source: docs/admin.md#listener.
"""
from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from busbar.admin.errors import AdminError, error_response
from busbar.admin.principal import credential_of
from busbar.config.validate_auth import split_hostport

__all__ = ["MAX_BODY_BYTES", "OPEN_HOST_REFUSED", "OPEN_ORIGIN_REFUSED", "UNAUTHORIZED", "AdminGuard",
           "open_mode_refusal"]

MAX_BODY_BYTES = 1024 * 1024
"""Largest admin request body, bytes (1 MiB): ``413 payload_too_large`` past it."""
UNAUTHORIZED = "a valid admin credential is required (Authorization: Bearer <token> or x-admin-token)"
OPEN_HOST_REFUSED = ("the admin API is open (auth.admin_auth: []) and answers only requests whose Host is localhost, "
                     "a loopback address or the admin_listen host; this Host was refused (DNS rebinding guard)")
OPEN_ORIGIN_REFUSED = ("the admin API is open (auth.admin_auth: []) and refuses cross-site browser requests; this "
                       "request's Origin is not the admin listener's own")


def _host_name(value: str) -> str | None:
    """The host of a ``Host`` header value (``name[:port]``, ``[v6][:port]``), lower-cased; ``None``
    when it does not parse."""
    try:
        parts = urlsplit("//" + value)
        parts.port                      # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return None
    host = parts.hostname
    if not host or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return host.rstrip(".")


def _allowed_host(host: str, listen_host: str) -> bool:
    if host in ("localhost", listen_host.lower()):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _same_listener(origin: str, host: str) -> bool:
    """Does ``origin`` (``scheme://host[:port]``) name the listener the ``Host`` header names? The
    scheme is not compared (TLS or not, only this listener serves that host and port)."""
    scheme, sep, netloc = origin.strip().lower().partition("://")
    return bool(sep) and scheme in ("http", "https") and netloc == host.strip().lower()


def open_mode_refusal(headers: Headers, listen_host: str) -> str | None:
    """Why an open admin API refuses a request with ``headers`` (:data:`OPEN_HOST_REFUSED` or
    :data:`OPEN_ORIGIN_REFUSED`), or ``None`` when it may proceed. ``listen_host``: the
    ``admin_listen`` host. A request without ``Host`` is not a browser's and
    proceeds."""
    raw_host = headers.get("host")
    if raw_host is not None:
        host = _host_name(raw_host.strip())
        if host is None or not _allowed_host(host, listen_host):
            return OPEN_HOST_REFUSED
    origin = headers.get("origin")
    if origin is not None and (raw_host is None or not _same_listener(origin, raw_host)):
        return OPEN_ORIGIN_REFUSED
    if headers.get("sec-fetch-site", "").strip().lower() in ("cross-site", "same-site"):
        return OPEN_ORIGIN_REFUSED
    return None


def _announces_body(headers: Headers) -> bool:
    return "transfer-encoding" in headers or headers.get("content-length", "0").strip() not in ("", "0")


class AdminGuard:
    """Authenticate, then cap the body (see the module docstring).

    Args:
        app: the admin app (its ``state.admin`` is the :class:`~busbar.admin.context.AdminContext`,
            or ``None`` for the routes-only app, which is passed through).
        max_body_bytes: the body cap in bytes.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ctx = scope["app"].state.admin if "app" in scope else None
        if scope["type"] != "http" or ctx is None or scope["path"] == "/healthz":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        body_announced = _announces_body(headers)
        if ctx.auth.open:
            refused = open_mode_refusal(headers, self._listen_host(ctx))
            if refused is not None:
                await self._refuse(scope, receive, send, AdminError("forbidden", refused), close=body_announced)
                return
        principal = await ctx.auth.authenticate(credential_of(headers))
        if principal is None:
            await self._refuse(scope, receive, send, AdminError(
                "unauthorized", UNAUTHORIZED, {"WWW-Authenticate": "Bearer"}), close=body_announced)
            return
        scope.setdefault("state", {})["principal"] = principal
        if not body_announced:
            await self.app(scope, receive, send)
            return
        declared = headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(scope, receive, send, principal.name)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._too_large(scope, receive, send, principal.name)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()
        await self.app(scope, replay, send)

    @staticmethod
    def _listen_host(ctx: Any) -> str:
        """The ``admin_listen`` host (``""`` when it does not parse)."""
        parsed = split_hostport(ctx.gateway.config.admin_listen)
        return parsed[0] if parsed is not None else ""

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, principal: str) -> None:
        ctx = scope["app"].state.admin
        path = scope["path"]
        try:
            ctx.audit.note(f"{scope['method']} {path}", path, "payload_too_large", principal)
        except RuntimeError:      # no running loop: nothing to record into
            pass
        mib = self.max_body_bytes / (1024 * 1024)
        await self._refuse(scope, receive, send, AdminError(
            "payload_too_large", f"the request body exceeds the admin API's {self.max_body_bytes}-byte "
                                 f"({mib:g} MiB) limit; send a smaller body"), close=True)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, exc: AdminError, *, close: bool) -> None:
        response = error_response(exc)
        if close:
            response.headers["connection"] = "close"
        await response(scope, receive, send)
