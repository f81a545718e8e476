"""What the failover walk receives from a hook chain: a :class:`Plan`.

- ``reply``: set when the request must not be routed (a gate's reject, an ``on_error: reject``, an
  empty restriction, an unparseable body): the walk returns it as is.
- ``excluded``: member indexes a restrict arm ruled out; the walk adds them to its exclusion set
  for every hop (the restriction persists across failover, and ``least_bad`` honours it).
- ``order``: the ranked walk: :meth:`Plan.pick` tries these members first, in order, skipping any
  excluded, tripped, at capacity or already tried; the omitted members come after, by SWRR
  (demoted, never excluded). ``None``: plain SWRR.
- ``policy`` / ``ordering``: who decided, stamped as ``x-busbar-route-policy`` on every reply of a
  pool with a non-default ordering (``weighted`` when everything abstained).

Source: docs/reliability.md#selection, docs/config-at-a-glance.md#observability.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from busbar.proxy.select import swrr_pick

if TYPE_CHECKING:
    from busbar.hooks.run import HookRun
    from busbar.proxy.relay import Reply
    from busbar.proxy.runtime import Member, Pool

ROUTE_POLICY = "x-busbar-route-policy"

__all__ = ["ROUTE_POLICY", "Plan"]


class Plan:
    """One request's routing plan for one pool (see the module docstring)."""

    __slots__ = ("excluded", "order", "ordering", "policy", "reply", "run")

    def __init__(self, *, reply: Reply | None = None, order: tuple[int, ...] | None = None,
                 excluded: frozenset[int] = frozenset(), policy: str | None = None, ordering: bool = False,
                 run: HookRun | None = None):
        self.reply = reply
        self.order = order
        self.excluded = excluded
        self.policy = policy
        self.ordering = ordering
        self.run = run

    def pick(self, pool: Pool, now: float, excluded: set[int]) -> Member | None:
        """The next member to try: the first usable ranked one, else SWRR over the rest."""
        order = self.order
        if order:
            members = pool.members
            for i in order:
                if i not in excluded:
                    m = members[i]
                    if m.usable(now):
                        return m
        return swrr_pick(pool, now, excluded)

    def stamp(self, reply: Reply) -> Reply:
        """Add ``x-busbar-route-policy`` to ``reply`` when this pool has a non-default ordering
        (a fallback pool that served the request has stamped its own already: it stays)."""
        if self.ordering:
            reply.headers.setdefault(ROUTE_POLICY, self.policy or "weighted")
        return reply
