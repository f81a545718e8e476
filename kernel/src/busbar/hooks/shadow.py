"""Shadow gates and decision traces: what a gate answered, for the log, the metrics and a dry run.

A gate ref with ``shadow: true`` is fired like any other gate, but its answer never decides: the
request proceeds as if it had abstained, and its ``on_error`` is never applied (a shadow gate that
times out cannot reject). :func:`record_shadow` logs the verdict (INFO, ``busbar.hooks.shadow``),
counts it on the gate's facade (``busbar_gate_shadow_verdicts_total{gate,arm}``) and, when the
request carries a trace, appends it there.

``arm_of(result)`` names what a :class:`busbar.hooks.fire.Result` amounts to: ``abstain``,
``reject``, ``restrict``, ``order``, ``rewrite``, or the failure reason (``timeout``, ``error``,
``garbage``, ``grant``, ``saturated``). :func:`describe` renders an arm for a human, with member
indexes shown as model names.

Source: docs/hooks.md#shadow-mode, docs/router.md#shadow-mode.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from busbar.hooks.reply import Abstain, Arms, Reject, Rewrite

if TYPE_CHECKING:
    from busbar.hooks.fire import Result
    from busbar.hooks.run import HookRun
    from busbar.hooks.specs import GateSpec

log = logging.getLogger("busbar.hooks.shadow")

__all__ = ["arm_of", "describe", "record_shadow", "trace_entry"]


def arm_of(result: Result) -> str:
    """The arm name of ``result`` (see the module docstring)."""
    if result.failure is not None:
        return result.failure
    arm = result.arm
    if isinstance(arm, Reject):
        return "reject"
    if isinstance(arm, Rewrite):
        return "rewrite"
    if isinstance(arm, Arms):
        if arm.restrict is not None:
            return "restrict"
        if arm.order:
            return "order"
    return "abstain"


def describe(answer: Any, models: Mapping[int, str]) -> dict[str, Any]:
    """A JSON-ready rendering of a gate's answer (an arm, a failure ``Result`` or ``None``).

    Args:
        answer: ``Abstain | Reject | Arms | Rewrite | None``.
        models: member index -> model name, to show an order as names.

    Returns:
        ``{"arm": "order", "order": ["m1", "m0"]}``, ``{"arm": "restrict", "tags_any": [...]}``,
        ``{"arm": "reject", "status": 403, "message": "..."}``, ``{"arm": "rewrite"}`` or
        ``{"arm": "abstain"}``.
    """
    if isinstance(answer, Reject):
        return {"arm": "reject", "status": answer.status, "message": answer.message}
    if isinstance(answer, Rewrite):
        return {"arm": "rewrite", "messages": len(answer.messages)}
    if isinstance(answer, Arms):
        out: dict[str, Any] = {"arm": "order" if answer.restrict is None else "restrict"}
        if answer.restrict is not None:
            out["tags_any"] = sorted(answer.restrict)
        if answer.order:
            out["order"] = [models.get(i, str(i)) for i in answer.order]
        return out
    if answer is None or isinstance(answer, Abstain):
        return {"arm": "abstain"}
    return {"arm": type(answer).__name__}


def trace_entry(gate: GateSpec, result: Result, models: Mapping[int, str]) -> dict[str, Any]:
    """One gate's reply as a trace entry: ``{gate, path, shadow, reply | failure, detail?}``."""
    entry: dict[str, Any] = {"gate": gate.name, "path": gate.path, "shadow": gate.shadow}
    if result.failure is not None:
        entry["failure"] = result.failure
        entry["detail"] = result.detail
        if not gate.shadow:
            entry["on_error"] = gate.on_error.describe()
    else:
        entry["reply"] = describe(result.arm, models)
    return entry


def record_shadow(gate: GateSpec, result: Result, run: HookRun, candidates: Sequence[Mapping[str, Any]]) -> None:
    """Log and count a shadow gate's ``result``; append it to ``run.trace`` when tracing. The
    caller then proceeds as if the gate had abstained."""
    arm = arm_of(result)
    facade = gate.facade
    counts: dict[str, int] = facade.shadow_verdicts
    counts[arm] = counts.get(arm, 0) + 1
    models = {int(c["idx"]): str(c["model"]) for c in candidates}
    if log.isEnabledFor(logging.INFO) or run.trace is not None:
        entry = trace_entry(gate, result, models)
        if run.trace is not None:
            run.trace.append(entry)
        log.info("shadow gate '%s' (%s) on request %s answered %s; not applied",
                 gate.name, gate.path, run.request_id, entry.get("reply", entry.get("failure")))
