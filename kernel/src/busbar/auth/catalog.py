"""The catalog routes behind the chain: ``GET /v1/models`` and ``GET /healthz?pool=`` (docs/auth.md#the-catalog).

With an ``auth.chain`` a stranger learns no pool or model name from them:

- ``visible_names(gw, scope) -> list[str] | Reply``: the names ``/v1/models`` lists (pools then
  models) that the identified caller may use (``Identity.may_use``); an unidentified caller gets
  the front door's OpenAI-envelope 401.
- ``pool_health_refusal(gw, scope, pool) -> Reply | None``: ``None`` when the caller may ask about
  ``pool`` (identified and granted it, whether or not it exists), else the 401, or the 403 naming
  the pool.

Without a chain (``gw.frontdoor is None``: the quickstart's open front door) every name is listed
and every pool's health answered. Plain ``/healthz`` is never gated (load balancers).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from busbar.auth.refusal import forbidden_pool, unauthenticated
from busbar.proto.registry import get_dialect

if TYPE_CHECKING:
    from starlette.types import Scope

    from busbar.proxy.gateway import Gateway
    from busbar.proxy.relay import Reply

__all__ = ["pool_health_refusal", "visible_names"]


async def visible_names(gw: Gateway, scope: Scope) -> list[str] | Reply:
    """Pool then model names the caller of ``scope`` may use, or the 401 refusal (OpenAI envelope)."""
    names = gw.routable_names()
    if gw.frontdoor is None:
        return names
    identity = await gw.frontdoor.identify_scope(scope)
    if identity is None:
        return unauthenticated(get_dialect("openai"))
    return [n for n in names if identity.may_use(n)]


async def pool_health_refusal(gw: Gateway, scope: Scope, pool: str) -> Reply | None:
    """``None`` when the caller of ``scope`` may see ``pool``'s health; else the 401 (unidentified)
    or the 403 naming ``pool`` (not granted), both in the OpenAI envelope."""
    if gw.frontdoor is None:
        return None
    identity = await gw.frontdoor.identify_scope(scope)
    if identity is None:
        return unauthenticated(get_dialect("openai"))
    if not identity.may_use(pool):
        return forbidden_pool(get_dialect("openai"), pool)
    return None
