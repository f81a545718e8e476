"""The per-hook specs a chain is built from, resolved once at boot.

:class:`GateSpec` is one gate occurrence (a ref in a pool's ``hooks:`` or in ``global_hooks:``)
with its facade, deadline, resolved ``on_error`` (:class:`OnError`), ``on_empty``, effective grant
and chain rank; :class:`TapSpec` is one tap occurrence with its stage. ``rank`` orders the priority
chain: ``(priority, 0 for a global / 1 for a pool ref, position in its list)`` (ties keep globals
first, then config order).

``OnError.kind``: ``nothing`` | ``weighted`` (the gate drops out of the decision), ``first`` (config
order), ``reject`` (503, fail closed), ``strategy`` (``strategy`` names a native ranking: an
infallible fallback), ``hook`` (``hook`` is the fallback :class:`GateSpec`, fired in its place with
its own grants, deadline and ``on_error``; chains are proven terminating at boot).

Source: docs/hooks.md#fail-safety, docs/hooks.md#native-strategies; docs/configuration.md, docs/hooks.md#configuring
(module-ref typed fields).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["GateSpec", "OnError", "TapSpec"]


@dataclass(frozen=True, slots=True)
class OnError:
    """A gate's resolved failure policy (see the module docstring)."""

    kind: str
    strategy: str | None = None
    hook: GateSpec | None = None

    def describe(self) -> str:
        if self.kind == "hook" and self.hook is not None:
            return f"{{ hook: {self.hook.name} }}"
        return self.strategy if self.kind == "strategy" and self.strategy else self.kind


@dataclass(frozen=True, slots=True)
class GateSpec:
    """One gate occurrence.

    Attributes:
        name: the hook's name in headers, metrics and messages (its ``module``).
        path: its config key path (``pools.smart.hooks[1]``).
        facade: the :class:`busbar.hooks.facade.HookFacade` it calls.
        timeout_ms: the decision deadline; ``timeout_s`` the same in seconds (derived, not passed).
        on_error, on_empty: failure and empty-restriction policies.
        transform: True when its effective prompt grant is ``rw``: it answers the ``transform``
            pass (reject > rewrite > abstain) instead of ``decide``.
        rank: its place in the priority chain.
        is_global: declared in ``global_hooks``.
        shadow: ``shadow: true``: fired and recorded, never applied (``busbar.hooks.shadow``).
    """

    name: str
    path: str
    facade: Any
    timeout_ms: int
    on_error: OnError
    on_empty: str
    transform: bool
    rank: tuple[int, int, int]
    is_global: bool
    shadow: bool = False
    timeout_s: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout_s", self.timeout_ms / 1000.0)     # read on every decision

    @property
    def prompt(self) -> str:
        return str(self.facade.prompt)

    @property
    def user(self) -> str:
        return str(self.facade.user)


@dataclass(frozen=True, slots=True)
class TapSpec:
    """One tap occurrence: ``at`` is request | route | attempt | completion."""

    name: str
    path: str
    facade: Any
    at: str
    rank: tuple[int, int, int]
    is_global: bool

    @property
    def prompt(self) -> str:
        return str(self.facade.prompt)
