"""``auth.role_bindings``: what roles asserted by a chain module earn on the data plane (docs/auth.md#role-bindings).

Nested by module: a role earns only what the binding under the module that asserted it grants.
``allowed_pools`` unions across the principal's bound roles (one bound role with the key omitted
widens the union to every pool); ``group`` is the first bound role's group in the order the module
asserted the roles. A role with no binding grants nothing, so a principal with no bound role may
use no pool (fail closed).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from busbar.config.schema_access import RoleBinding

__all__ = ["DataGrant", "data_grant", "listed_pools"]

DataGrant = tuple[str | None, frozenset[str] | None]
"""``(group, allowed_pools)``: the group to charge through (``None`` = none) and the pools
(``None`` = every pool)."""


def data_grant(bindings: Mapping[str, RoleBinding], roles: Iterable[str]) -> DataGrant:
    """The data-plane grant of ``roles`` under one module's ``bindings`` (role -> binding)."""
    group: str | None = None
    pools: set[str] | None = set()
    for role in roles:
        b = bindings.get(role)
        if b is None:
            continue
        if group is None:
            group = b.group
        if b.allowed_pools is None:
            pools = None
        elif pools is not None:
            pools.update(b.allowed_pools)
    return group, None if pools is None else frozenset(pools)


def listed_pools(bindings: Mapping[str, RoleBinding], roles: Iterable[str]) -> frozenset[str]:
    """Every name some bound role of ``roles`` lists in ``allowed_pools`` (what an ad-hoc route's
    provider needs even when another role widens the grant to every pool)."""
    listed: set[str] = set()
    for role in roles:
        b = bindings.get(role)
        if b is not None and b.allowed_pools is not None:
            listed.update(b.allowed_pools)
    return frozenset(listed)
