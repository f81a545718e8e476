"""Start and stop the admin plane beside the data listener (called by ``busbar.server.lifecycle``).

``await start_admin(state, loaded) -> AdminPlane``:

1. the store: ``gw.store`` (opened by ``busbar.store.attach.start_store`` before this runs), or a
   ``MemoryStore`` of the admin plane's own when the gateway carries none;
2. the audit log on it (``gw.audit``), which records ``boot`` and one ``plugin.load`` per loaded
   plugin (the front door notes each refused use of a revoked key there: ``busbar.auth``);
3. the runtime groups (``gw.runtime_groups``), loaded from the store;
4. the admin chain (``auth.admin_auth``): ``admin-tokens`` tokens resolved from their secret
   references, identity-provider ``kind: auth`` plugins opened with their settings (scopes from
   ``auth.role_bindings.<module>.<role>.admin_scope`` under ``max_admin_scope``); ``[]`` = open (a
   loud warning). When nothing could ever authenticate (the default
   ``[admin-tokens]`` without ``token:``) no listener starts and one line says how to enable it;
5. the FastAPI app (``busbar.admin.app``) served by uvicorn on ``admin_listen`` from a socket bound
   here, so a taken port is a clear :class:`AdminStartError` (the process exits 1); with
   ``admin_tls`` over TLS (``busbar.server.tls``; ``client_ca`` = client certificates required),
   each handshake capped by ``limits.tls_handshake_timeout_secs``, with the data listener's
   connection limits (``busbar.server.listener.protocol_class``: a 64 KiB request head, 431 past
   it; ``limits.header_read_timeout_secs`` for a head, 408 past it; ``limits.keep_alive_timeout_secs``
   idle between requests) and the admin app's own body cap (``busbar.admin.guard``). Under
   ``--workers N`` only worker 0 serves it (and writes the boot records); every worker keeps the
   audit log and the runtime groups.

Tokens are signed with ``gw.signing`` when the front door loaded a keyring, else with a keyring
loaded on the first mint (``busbar.auth.signing.load_keyring``: ``auth.signing_key``, the store,
or the generated file next to config.yaml).

Source: docs/admin.md#listener.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import uvicorn
from busbar_sdk.store import MemoryStore, Store, StoreError

from busbar import __version__
from busbar.admin.app import create_admin_app
from busbar.admin.audit import AuditLog
from busbar.admin.context import AdminContext
from busbar.admin.keys import KeyService
from busbar.admin.principal import AdminAuth, IdpEntry
from busbar.admin.provision import RuntimeGroups
from busbar.config.schema_base import BUILTIN_ADMIN_MODULE
from busbar.config.validate_auth import split_hostport
from busbar.server.listener import ListenerServer, protocol_class
from busbar.server.workers import worker_index

if TYPE_CHECKING:
    from busbar.auth.signing import Keyring
    from busbar.config.load import LoadedConfig
    from busbar.proxy.gateway import Gateway
    from busbar.server.app import AppState

__all__ = ["AdminPlane", "AdminStartError", "start_admin"]

log = logging.getLogger("busbar.admin")


ADMIN_DRAIN_S = 3.0
"""Seconds an admin request in flight may finish at shutdown."""


class AdminStartError(Exception):
    """The admin plane cannot start (the message is one line naming the key and the fix).

    ``status``: the process's exit status: 2 for a refused config (an admin_auth token or plugin,
    admin_tls), 1 when something outside the config failed (the port is taken, the store errs)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class _Server(ListenerServer):
    """The admin listener (TLS when ``admin_tls`` is set) without uvicorn's own signal handlers: the
    data listener's handle SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _secret(ref: Any, where: str, gw: Gateway) -> str:
    from busbar.config.secrets import resolve_secret

    resolver = None
    if gw.plugins is not None:
        from busbar.loader.secrets import SecretModuleResolver

        resolver = SecretModuleResolver(gw.plugins.current)
    return resolve_secret(ref, os.environ, where=where, module_resolver=resolver)


def admin_auth(loaded: LoadedConfig, gw: Gateway) -> AdminAuth:
    """The resolved admin chain. Raises :class:`AdminStartError` for a token that does not resolve."""
    from busbar.auth.boot import FrontDoorBootError, _plugin_module
    from busbar.config.secrets import SecretError

    modules = loaded.config.auth.modules("admin_auth")
    tokens = []
    idp = []
    for i, mod in enumerate(modules):
        where = f"auth.admin_auth[{i}]"
        if mod.name == BUILTIN_ADMIN_MODULE:
            if mod.token is not None:
                try:
                    tokens.append(_secret(mod.token, f"{where}.{mod.name}.token", gw))
                except SecretError as e:
                    raise AdminStartError(f"{loaded.config_path.name}: {e}", status=2) from None
            continue
        try:
            idp.append(IdpEntry(_plugin_module(gw, loaded, mod, where), mod.max_admin_scope))
        except FrontDoorBootError as e:
            raise AdminStartError("\n".join(e.faults), status=2) from None
    return AdminAuth(tokens, open_admin=not modules, idp=idp)


class AdminPlane:
    """The running admin plane: ``ctx`` (services), ``server`` / ``task`` (None when no listener)."""

    def __init__(self, ctx: AdminContext, server: uvicorn.Server | None, task: asyncio.Task[None] | None,
                 owned_store: Store | None) -> None:
        self.ctx = ctx
        self.server = server
        self.task = task
        self._owned_store = owned_store

    async def stop(self) -> None:
        """Stop the listener, flush pending audit records, close a store the plane opened itself."""
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.task, 5)
        with contextlib.suppress(Exception):
            await self.ctx.audit.drain()
        if self._owned_store is not None:
            with contextlib.suppress(StoreError):
                await self._owned_store.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host or "0.0.0.0", port))
    except OSError as e:
        sock.close()
        raise AdminStartError(f"config.yaml: admin_listen: cannot listen on {host}:{port} ({e.strerror}); free "
                              f"the port or choose another admin_listen") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _tls_context(loaded: LoadedConfig, gw: Gateway) -> ssl.SSLContext | None:
    """``admin_tls`` as a server context (mTLS when it has ``client_ca``), or ``None``."""
    from busbar.server.tls import TlsError, listener_context

    try:
        return listener_context(loaded.config.admin_tls, "admin_tls", os.environ,
                                gw.plugins.current if gw.plugins is not None else None)
    except TlsError as e:
        raise AdminStartError("\n".join(e.faults), status=2) from None


def _issuer(loaded: LoadedConfig, gw: Gateway, store: Store) -> Any:
    holder: dict[str, Keyring] = {}

    async def issue(sub: str, exp: int, generation: int) -> str:
        from busbar.auth.signing import load_keyring
        from busbar.auth.tokens import mint

        keyring: Keyring | None = gw.signing or holder.get("k")
        if keyring is None:
            ref = loaded.config.auth.signing_key
            text = _secret(ref, "auth.signing_key", gw) if ref is not None else None
            keyring = await load_keyring(text, config_path=loaded.config_path,
                                         store=None if store.backend == "memory" else store)
            holder["k"] = keyring
        return mint(keyring, sub, exp, generation)

    def info() -> dict[str, Any] | None:
        keyring: Keyring | None = gw.signing or holder.get("k")
        if keyring is None:
            return None
        return {"kid": keyring.kid, "algorithm": "ed25519", "public_key": keyring.public_key_b64,
                "source": keyring.source.split(":", 1)[0]}
    return issue, info


async def start_admin(state: AppState, loaded: LoadedConfig) -> AdminPlane:
    """Start the admin plane (see the module docstring). Raises :class:`AdminStartError`."""
    gw = state.gateway
    cfg = loaded.config
    store: Store | None = gw.store
    owned = None
    if store is None:
        owned = store = MemoryStore()
        await store.open()
    audit = AuditLog(store)
    gw.audit = audit
    runtime = RuntimeGroups(store)
    serving = worker_index() in (None, 0)
    try:
        await runtime.load()
        if serving:
            await audit.append("boot", f"busbar/{__version__}", "ok", "system")
            if gw.plugins is not None:
                for plugin in gw.plugins.current:
                    await audit.append("plugin.load", f"plugin/{plugin.name}@{plugin.manifest.version}", "ok",
                                       "system")
    except StoreError as e:
        raise AdminStartError(f"store ({store.backend}): the admin plane cannot read or write it: {e}") from None
    gw.runtime_groups = runtime
    auth = admin_auth(loaded, gw)
    issue, info = _issuer(loaded, gw, store)
    keys = KeyService(store, audit, runtime, lambda: state.gateway.config, issue,
                      refresh=lambda: state.gateway.keysync.sync())
    ctx = AdminContext(app_state=state, store=store, audit=audit, keys=keys, runtime_groups=runtime, auth=auth)
    ctx.extras["signing_info"] = info
    if not serving:
        return AdminPlane(ctx, None, None, owned)
    if not auth.usable:
        log.info("admin API off: auth.admin_auth has %s without a token:; set auth.admin_auth: "
                 "[admin-tokens: { token: { env: BUSBAR_ADMIN_TOKEN } }] to serve it on %s",
                 BUILTIN_ADMIN_MODULE, cfg.admin_listen)
        return AdminPlane(ctx, None, None, owned)
    if auth.open:
        log.warning("auth.admin_auth: [] is an OPEN admin API on %s: anyone who reaches it has full admin "
                    "authority (development only)", cfg.admin_listen)
    parsed = split_hostport(cfg.admin_listen)
    if parsed is None:
        raise AdminStartError(f"config.yaml: admin_listen: '{cfg.admin_listen}' is not host:port")
    host, port = parsed
    tls = _tls_context(loaded, gw)
    sock = _bind(host, port)
    limits = cfg.limits
    config = uvicorn.Config(create_admin_app(ctx), lifespan="off", access_log=False,
                            log_level=logging.getLogger().getEffectiveLevel(),
                            http=protocol_class(limits.header_read_timeout_secs),
                            timeout_keep_alive=limits.keep_alive_timeout_secs)
    server = _Server(config, tls, cfg.limits.tls_handshake_timeout_secs, drain_s=ADMIN_DRAIN_S)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if task.done():
        raise AdminStartError(f"config.yaml: admin_listen: the admin API did not start on {cfg.admin_listen}")
    bound = sock.getsockname()
    log.info("busbar admin API listening on %s://%s:%d%s", "https" if tls else "http", bound[0], bound[1],
             " (client certificates required)" if cfg.admin_tls is not None and cfg.admin_tls.client_ca else "")
    return AdminPlane(ctx, server, task, owned)
