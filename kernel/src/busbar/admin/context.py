"""What every admin route reads: :class:`AdminContext`, on ``request.app.state.admin``.

``admin_of(request) -> AdminContext``; ``ctx.gateway`` is the live gateway (read per call, so a
reload applies), ``ctx.store`` the opened store, ``ctx.audit`` the audit log, ``ctx.keys`` the key
service, ``ctx.runtime_groups`` the auto-provisioned groups, ``principal_of(request)`` the caller.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Request

from busbar.admin.idempotency import IdempotencyCache
from busbar.admin.principal import AdminAuth, Principal
from busbar.admin.ratelimit import MutationLimiter

if TYPE_CHECKING:
    from busbar_sdk.store import Store

    from busbar.admin.audit import AuditLog
    from busbar.admin.keys import KeyService
    from busbar.admin.provision import RuntimeGroups
    from busbar.proxy.gateway import Gateway
    from busbar.server.app import AppState

__all__ = ["AdminContext", "admin_of", "principal_of"]


@dataclass
class AdminContext:
    """The admin plane's services (see the module docstring)."""

    app_state: AppState
    store: Store
    audit: AuditLog
    keys: KeyService
    runtime_groups: RuntimeGroups
    auth: AdminAuth
    limiter: MutationLimiter = field(default_factory=MutationLimiter)
    idempotency: IdempotencyCache = field(default_factory=IdempotencyCache)
    started_at: float = field(default_factory=time.time)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def gateway(self) -> Gateway:
        """The live gateway."""
        return self.app_state.gateway


def admin_of(request: Request) -> AdminContext:
    """The :class:`AdminContext` of the app serving ``request``."""
    ctx: AdminContext = request.app.state.admin
    return ctx


def principal_of(request: Request) -> Principal:
    """The authenticated caller (set by the app's authorization dependency)."""
    p: Principal = request.state.principal
    return p
