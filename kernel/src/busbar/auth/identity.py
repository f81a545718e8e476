"""``Identity``: the caller the data-plane chain resolved (docs/auth.md#the-chain).

One per authenticated request, on ``call.record.identity``; ``None`` there means the front door is
open (``auth.chain: []``). Frozen: chain modules build it, nothing downstream edits it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Identity", "IdentityKind"]

IdentityKind = Literal["key", "sigv4", "plugin"]
"""How the caller proved itself: a ``bbk_`` token (``key``), an inbound SigV4 signature made with a
key's AWS credential (``sigv4``), or a ``kind: auth`` plugin's ``Identify`` (``plugin``)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """A verified caller.

    Attributes:
        principal: the virtual key id (``vk_...``) for ``key``/``sigv4``, the IdP subject for ``plugin``.
        module: the chain module that identified the caller (``keys``, or the plugin's runtime name).
        group: the ``groups:`` bucket the caller charges through; ``None`` = no group (unlimited).
        allowed_pools: pools the caller may target; ``None`` = every pool (not an ad-hoc
            route's provider: see :meth:`may_use`), empty = none.
        labels: the key's labels (string -> string); empty for IdP callers.
        roles: roles the module asserted (IdP callers); empty for keys.
        kind: see :data:`IdentityKind`.
        listed: names granted explicitly beyond ``allowed_pools`` (an IdP caller whose roles widen
            ``allowed_pools`` to every pool keeps the names its other roles list, so an ad-hoc
            provider listed there stays granted).
    """

    principal: str
    module: str
    group: str | None = None
    allowed_pools: frozenset[str] | None = None
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    roles: frozenset[str] = frozenset()
    kind: IdentityKind = "key"
    listed: frozenset[str] = frozenset()

    def may_use(self, pool: str, adhoc: bool = False) -> bool:
        """Whether this caller may target ``pool`` (a pool or model name), or with ``adhoc`` the
        provider ``pool`` of an ad-hoc route ``/{provider}/{model}/...``: that needs an explicit
        grant (the provider listed in ``allowed_pools``; ``None`` means every pool, not every provider)."""
        if self.allowed_pools is None:
            return not adhoc or pool in self.listed
        return pool in self.allowed_pools
