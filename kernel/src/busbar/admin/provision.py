"""Runtime groups: leaves auto-provisioned by a mint's ``parent:``, beside the configured tree.

A mint ``{"group": "user:bob", "parent": "eng"}`` for a group that does not exist creates it under
``eng`` with the limits of the nearest ``child_default`` up the chain (inherit-only when none). The
set is persisted as the store meta ``groups.runtime`` (JSON ``{name: {"parent", "limits",
"created_at"}}``), loaded at start, and served in-process by :class:`RuntimeGroups`
(``gw.runtime_groups``): :meth:`RuntimeGroups.all` gives ``{name: GroupConfig}``, and every
callback in ``on_change`` runs after a group is added (the enforcement reads them from there).

Source: docs/admin.md#auto-provisioned-groups.
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from busbar_sdk.store import Store

from busbar.config.schema_access import GroupConfig, GroupLimit

__all__ = ["MAX_DEPTH", "META_NAME", "NAME_RE", "RuntimeGroups", "chain_depth", "template_for"]

log = logging.getLogger("busbar.admin")

META_NAME = "groups.runtime"
#: The deepest chain a group may sit in (the config's own rule).
MAX_DEPTH = 8
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$")


def chain_depth(name: str, groups: Mapping[str, GroupConfig]) -> int:
    """How many groups the chain from ``name`` up to its root holds (``name`` included)."""
    depth, seen = 0, set()
    cur: str | None = name
    while cur is not None and cur in groups and cur not in seen:
        seen.add(cur)
        depth += 1
        cur = groups[cur].parent
    return depth


def template_for(parent: str, groups: Mapping[str, GroupConfig]) -> list[GroupLimit]:
    """The limits of the nearest ``child_default`` from ``parent`` up (``[]``: inherit-only)."""
    seen: set[str] = set()
    cur: str | None = parent
    while cur is not None and cur in groups and cur not in seen:
        seen.add(cur)
        g = groups[cur]
        if g.child_default is not None:
            return [GroupLimit.model_validate(lim.model_dump()) for lim in g.child_default.limits]
        cur = g.parent
    return []


class RuntimeGroups:
    """The auto-provisioned groups of this fleet (see the module docstring).

    Args:
        store: the opened store holding ``groups.runtime``.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._groups: dict[str, GroupConfig] = {}
        self._created: dict[str, int] = {}
        self.on_change: list[Callable[[dict[str, GroupConfig]], None]] = []

    async def load(self) -> None:
        """Read ``groups.runtime`` from the store (an unreadable value is logged and ignored)."""
        raw = await self.store.get_meta(META_NAME)
        self._groups, self._created = self._parse(raw)

    @staticmethod
    def _parse(raw: str | None) -> tuple[dict[str, GroupConfig], dict[str, int]]:
        groups: dict[str, GroupConfig] = {}
        created: dict[str, int] = {}
        if not raw:
            return groups, created
        try:
            doc = json.loads(raw)
            for name, body in doc.items():
                groups[name] = GroupConfig(parent=body["parent"],
                                           limits=[GroupLimit.model_validate(x) for x in body.get("limits", [])])
                created[name] = int(body.get("created_at", 0))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            log.error("store meta %s is unreadable (%s); runtime groups are ignored", META_NAME, e)
            return {}, {}
        return groups, created

    def all(self) -> dict[str, GroupConfig]:
        """``{name: GroupConfig}`` of every runtime group (a copy)."""
        return dict(self._groups)

    def created_at(self, name: str) -> int | None:
        """When ``name`` was provisioned (Unix seconds), or ``None``."""
        return self._created.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._groups

    def __len__(self) -> int:
        return len(self._groups)

    async def add(self, name: str, parent: str, limits: list[GroupLimit], now: int) -> GroupConfig:
        """Provision ``name`` under ``parent`` and persist the set (re-read first, so another node's
        additions are kept). Raises ``StoreError``."""
        fresh, created = self._parse(await self.store.get_meta(META_NAME))
        group = GroupConfig(parent=parent, limits=limits)
        fresh[name] = group
        created[name] = now
        doc: dict[str, Any] = {n: {"parent": g.parent, "created_at": created.get(n, now),
                                   "limits": [lim.model_dump(exclude_none=True) for lim in g.limits]}
                               for n, g in fresh.items()}
        await self.store.put_meta(META_NAME, json.dumps(doc, sort_keys=True))
        self._groups, self._created = fresh, created
        for cb in list(self.on_change):
            try:
                cb(self.all())
            except Exception:
                log.exception("runtime groups listener failed")
        return group
