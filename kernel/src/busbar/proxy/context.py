"""``GatewayContext``: what the hooks engine needs of the running gateway, as a typing Protocol.

``busbar.proxy.gateway.Gateway`` satisfies it structurally (mypy checks this where the gateway hands
itself to ``busbar.hooks.attach``). ``busbar.hooks`` imports this module under ``TYPE_CHECKING`` only,
so the hooks package never imports the gateway at run time and the gateway imports the hooks
package at module level (no function-local import to break a cycle).

Members (read by ``busbar.hooks.attach`` / ``reattach``, ``PoolChain.plan`` and the hook metrics):

- ``loaded``: the ``LoadedConfig`` the gateway was built from (pools, ``global_hooks``, limits).
- ``pools``: pool name -> ``Pool`` (members in config order, idx = position).
- ``clock()``: monotonic seconds, the clock breakers and budgets read.
- ``metrics``: the request metrics (``NullMetrics`` when ``metrics:`` is absent); hooks count
  route-policy selections and rejections there.
- ``hooks``: the installed ``HookEngine`` or ``None``; ``attach`` / ``reattach`` assign it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from busbar.config.load import LoadedConfig
    from busbar.hooks.engine import HookEngine
    from busbar.proxy.metrics import NullMetrics
    from busbar.proxy.runtime import Pool

__all__ = ["GatewayContext"]


class GatewayContext(Protocol):
    """The gateway as the hooks engine sees it (see the module docstring)."""

    hooks: HookEngine | None

    @property
    def loaded(self) -> LoadedConfig: ...

    @property
    def pools(self) -> Mapping[str, Pool]: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def metrics(self) -> NullMetrics: ...
