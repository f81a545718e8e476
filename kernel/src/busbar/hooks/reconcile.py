"""Reconcile: every gate's verdict of one request -> one routing decision. Pure and deterministic.

Input: the verdicts in **priority-chain order** (ascending ``priority``; ties keep globals first,
then config order), each already coerced by the gate's ``on_error`` (a gate that failed under
``nothing``/``weighted`` is simply absent), plus the pool's base ordering (a native strategy's
ranking or ``None``).

Rules (docs/hooks.md#reconcile-several-gates-one-decision:

1. Any reject wins; the first reject in the chain (the lowest priority) surfaces its status and
   message.
2. Restricts intersect, in chain order, over the members carrying any of each gate's tags. A
   restrict that would empty the set applies that gate's ``on_empty``: ``reject`` = 503 (fail
   closed), ``weighted`` = that restriction is ignored (advisory escape).
3. With several orders the last in the chain wins, re-validated against the post-restrict set (an
   order that empties out is an abstain, and the one before it is considered). No gate order: the
   base strategy's ranking, re-validated the same way. No order at all: SWRR (``order`` None).

Source: docs/hooks.md#reconcile-several-gates-one-decision, docs/hooks.md#native-strategies; docs/configuration.md,
docs/hooks.md#configuring; docs/reliability.md#selection.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Decision", "Verdict", "reconcile"]


@dataclass(slots=True)
class Verdict:
    """One participating gate's answer.

    Attributes:
        policy: the deciding hook's name (its module) or a strategy name.
        reject: ``(status, message)`` when it rejects.
        restrict: the tags of a restrict arm.
        order: a ranked list of member indexes.
        on_empty: the gate's ``on_empty`` (``reject`` | ``weighted``).
        failure: set when the verdict is a failed gate's ``on_error: reject`` (``timeout``,
            ``error``, ...), not a deliberate reply.
    """

    policy: str
    reject: tuple[int, str] | None = None
    restrict: frozenset[str] | None = None
    order: tuple[int, ...] | None = None
    on_empty: str = "reject"
    failure: str | None = None


@dataclass(slots=True)
class Decision:
    """The reconciled decision.

    Attributes:
        reject: ``(status, message)`` to answer with, or ``None``.
        policy: who decided (the rejecting gate, the winning order's gate or strategy), or ``None``
            when nobody did (SWRR).
        allowed: member indexes that may serve (``None`` = all); persists across failover.
        order: the ranked walk (member indexes) or ``None`` (SWRR).
        empty: the reject came from an empty restrict intersection (``on_empty: reject``).
        failure: the reject is a failed gate's ``on_error: reject`` (its failure reason).
    """

    reject: tuple[int, str] | None = None
    policy: str | None = None
    allowed: frozenset[int] | None = None
    order: tuple[int, ...] | None = None
    empty: bool = False
    failure: str | None = None


def _revalidate(order: Sequence[int], allowed: frozenset[int] | None) -> tuple[int, ...]:
    if allowed is None:
        return tuple(order)
    return tuple(i for i in order if i in allowed)


def reconcile(verdicts: Sequence[Verdict], tags_of: Mapping[int, frozenset[str]],
              base: tuple[str, tuple[int, ...]] | None = None) -> Decision:
    """Reconcile ``verdicts`` (chain order) over a pool whose members carry ``tags_of[idx]``.

    Args:
        verdicts: the participating gates' verdicts, in priority-chain order.
        tags_of: member index -> its tags, for every member of the pool.
        base: ``(strategy name, ranking)`` of the pool's base strategy, or ``None``.
    """
    if len(verdicts) == 1:              # the common case: one gate's order, nothing to intersect
        v = verdicts[0]
        if v.reject is None and v.restrict is None and v.order:
            return Decision(policy=v.policy, order=tuple(v.order))
    for v in verdicts:
        if v.reject is not None:
            return Decision(reject=v.reject, policy=v.policy, failure=v.failure)
    allowed: frozenset[int] | None = None
    for v in verdicts:
        if v.restrict is None:
            continue
        tags = v.restrict
        hit = frozenset(i for i, t in tags_of.items() if not t.isdisjoint(tags))
        new = hit if allowed is None else allowed & hit
        if not new:
            if v.on_empty == "weighted":
                continue
            wanted = ", ".join(sorted(tags))
            return Decision(reject=(503, (f"hook '{v.policy}' restricted this request to members tagged "
                                         f"{wanted}, and no member left can serve it")),
                            policy=v.policy, empty=True)
        allowed = new
    for v in reversed(verdicts):
        if v.order is None:
            continue
        order = _revalidate(v.order, allowed)
        if order:
            return Decision(policy=v.policy, allowed=allowed, order=order)
    if base is not None:
        order = _revalidate(base[1], allowed)
        if order:
            return Decision(policy=base[0], allowed=allowed, order=order)
    return Decision(allowed=allowed)
