"""The admin app in-process over httpx's ASGI transport, on a real gateway and a real store.

For the rules a booting process cannot reach yet (``groups:`` is refused at boot until the limit
tree is enforced; delegated principals with less than ``full``) and for clock-driven ones (the
mutation budget's minute window). ``admin_app(config_yaml, *, scoped=..., clock=...)`` ->
``(httpx.AsyncClient, AdminContext)``; the client carries the operator token ``TOKEN``.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
from busbar.admin.app import create_admin_app
from busbar.admin.audit import AuditLog
from busbar.admin.context import AdminContext
from busbar.admin.keys import KeyService
from busbar.admin.principal import AdminAuth
from busbar.admin.provision import RuntimeGroups
from busbar.admin.ratelimit import MutationLimiter
from busbar.auth.signing import generate_text, keyring_from_text
from busbar.auth.tokens import mint
from busbar.config.load import load_config_text
from busbar.proxy.gateway import Gateway
from busbar.server.app import AppState
from busbar_sdk.store import MemoryStore, Store

TOKEN = "inproc-t0ken"
ENV = {"T_KEY": "sk-inproc"}
BASE = """
providers:
  openai: { api_key: { env: T_KEY }, base_url: "http://127.0.0.1:9" }
models:
  gpt: { provider: openai }
pools:
  fast: { members: [ { model: gpt } ] }
"""


@asynccontextmanager
async def admin_app(extra_yaml: str = "", *, scoped: list[tuple[str, str, frozenset[str]]] | None = None,
                    clock: Callable[[], float] | None = None, store: Store | None = None
                    ) -> AsyncIterator[tuple[httpx.AsyncClient, AdminContext]]:
    loaded = load_config_text(BASE + extra_yaml, ENV)
    gw = Gateway.build(loaded, ENV)
    state = AppState(gateway=gw)
    store = store or MemoryStore()
    await store.open()
    audit = AuditLog(store)
    runtime = RuntimeGroups(store)
    await runtime.load()
    keyring = keyring_from_text(generate_text(), "test")

    async def issue(sub: str, exp: int, generation: int) -> str:
        return mint(keyring, sub, exp, generation)

    keys = KeyService(store, audit, runtime, lambda: state.gateway.config, issue)
    ctx = AdminContext(app_state=state, store=store, audit=audit, keys=keys, runtime_groups=runtime,
                       auth=AdminAuth([TOKEN], scoped=scoped),
                       limiter=MutationLimiter(clock=clock) if clock else MutationLimiter())
    transport = httpx.ASGITransport(app=create_admin_app(ctx))
    async with httpx.AsyncClient(transport=transport, base_url="http://admin/api/v1/admin",
                                 headers={"authorization": f"Bearer {TOKEN}"}) as client:
        try:
            yield client, ctx
        finally:
            await audit.drain()
            await gw.aclose()
            await store.close()
