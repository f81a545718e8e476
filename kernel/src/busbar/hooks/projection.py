"""The projection: the read-only view of one request and its candidates that a hook is sent.

What lives here: pure builders of the wire dicts (``request``, ``candidates``, ``stage``) and the
per-gate copy of the candidates. What must not: grants policy (``busbar.hooks.grants``), firing, reconcile.

Shapes (docs/hooks.md#what-a-hook-receives); optional fields are
**absent, never null**:

- ``request``: ``request_id``, ``pool``, ``ingress_protocol`` (anthropic | openai | gemini |
  bedrock | cohere | responses), ``operation``? (a non-chat operation such as ``embeddings``, whose
  inputs count as one user message each; absent for chat), ``message_count``, ``has_tools``,
  ``total_chars`` (characters of every text, thinking and tool-result text block across system +
  messages; a size signal, not a token count), ``max_tokens``? (absent when the caller set no output cap), ``stream``.
  Under ``prompt: ro|rw``: ``system``? (flattened system text, absent when the request has none)
  and ``messages`` (``[{"role", "text"}]``, text flattened: text, thinking and tool-result text
  included, a tool call as its compact JSON input, images and files skipped, redacted reasoning as
  the fixed marker ``[busbar:redacted_reasoning]``). Under ``user: ro`` (decide payloads only):
  ``user`` ``{key_id?, key_name?, user?}`` built from the resolved key record and the body's
  end-user field, never the credential.
- ``candidates``: one per healthy member (usable now, not in ``failover.exclusions``): ``idx``,
  ``model``, ``provider``, ``weight``, ``context_max``?, ``tier``?, ``tags``? (absent when the
  member declares none), ``cost_per_mtok``? (``(input_utok + output_utok) / 2`` from the model's
  ``rate_card`` entry), ``latency_ms``? (the lane's rolling EWMA, absent before its first
  success), ``available_concurrency`` (free semaphore permits; an unbounded lane reports
  ``UNBOUNDED_PERMITS - inflight``), ``budget_remaining``? and ``rate_headroom``? (the caller's group
  chain, added by ``busbar.limits.signals.stamp``; absent when the caller has no group).
- ``stage`` (taps): ``{"at", ...}`` with only the stage's own fields.

The field names and their wire order are the wire contract's (``busbar_sdk.wire.REQUEST_FIELDS``,
``CANDIDATE_FIELDS``, ``STAGE_FIELDS``; the sdk's models read the same lists), and so are
``REDACTED_REASONING`` and ``UNBOUNDED_PERMITS`` (``available_concurrency`` of an unbounded lane, minus
its in-flight count so ``least_busy`` still prefers the idler one). The literal keys below are
checked against those lists by ``tests/unit/hooks/test_wire_contract.py``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from busbar_sdk.wire import REDACTED_REASONING, UNBOUNDED_PERMITS

from busbar.ir.model import IrRequest, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

__all__ = ["REDACTED_REASONING", "UNBOUNDED_PERMITS", "available_permits", "candidate_static", "candidate_views",
           "copy_candidates", "cost_per_mtok", "ir_sizes", "prompt_view", "request_view", "shape_view", "stage_view",
           "user_view", "Prompt", "Sizes"]


def available_permits(lane: Any) -> int:
    """Free semaphore permits of ``lane`` now (never negative)."""
    cap: int | None = lane.max_concurrent
    inflight: int = lane.inflight
    if cap is None:
        return UNBOUNDED_PERMITS - inflight
    return max(0, cap - inflight)


def cost_per_mtok(rate_card: Mapping[str, Any] | None, lane: Any) -> float | None:
    """``(input_utok + output_utok) / 2`` of the lane's rate-card entry; ``None`` if unpriced.

    The entry is looked up by the ``models:`` name, then by the upstream model id.
    """
    if not rate_card:
        return None
    entry = rate_card.get(lane.name)
    if entry is None:
        entry = rate_card.get(lane.upstream_model)
    if entry is None:
        return None
    return (float(entry.input_utok) + float(entry.output_utok)) / 2.0


def _block_text(block: Any, parts: list[str]) -> int:
    """Append the text a provider sees in ``block`` to ``parts``; return its size in characters."""
    if isinstance(block, TextBlock):
        parts.append(block.text)
        return len(block.text)
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            parts.append(REDACTED_REASONING)
            return 0
        parts.append(block.text)
        return len(block.text)
    if isinstance(block, ToolResultBlock):
        n = 0
        for inner in block.content:
            n += _block_text(inner, parts)
        return n
    if isinstance(block, ToolUseBlock):
        parts.append(orjson.dumps(block.input).decode())
        return 0
    return 0                       # images and files: skipped


def _flatten(blocks: Iterable[Any]) -> tuple[str, int]:
    parts: list[str] = []
    n = 0
    for b in blocks:
        n += _block_text(b, parts)
    return "\n".join(p for p in parts if p), n


#: The size fields of a ``request`` view: ``(message_count, has_tools, total_chars, max_tokens)``
#: (``max_tokens`` ``None`` when the caller set no output cap).
Sizes = tuple[int, bool, int, Any]


def ir_sizes(ir: IrRequest) -> Sizes:
    """The :data:`Sizes` of a request, from its IR."""
    total = 0
    for b in ir.system:
        total += _size(b)
    for m in ir.messages:
        for b in m.content:
            total += _size(b)
    return len(ir.messages), bool(ir.tools), total, ir.max_tokens


def shape_view(sizes: Sizes, *, request_id: str, pool: str, ingress: str, stream: bool,
               operation: str | None = None) -> dict[str, Any]:
    """The shape-only ``request`` object (no prompt text, no identity) from its :data:`Sizes`;
    ``operation``: a non-chat operation's name (absent for chat)."""
    count, has_tools, total, max_tokens = sizes
    if operation is None:
        view: dict[str, Any] = {"request_id": request_id, "pool": pool, "ingress_protocol": ingress,
                                "message_count": count, "has_tools": has_tools, "total_chars": total}
    else:
        view = {"request_id": request_id, "pool": pool, "ingress_protocol": ingress, "operation": operation,
                "message_count": count, "has_tools": has_tools, "total_chars": total}
    if max_tokens is not None:
        view["max_tokens"] = max_tokens
    view["stream"] = stream
    return view


def request_view(ir: IrRequest, *, request_id: str, pool: str, ingress: str, stream: bool) -> dict[str, Any]:
    """The shape-only ``request`` object (no prompt text, no identity), from the IR."""
    return shape_view(ir_sizes(ir), request_id=request_id, pool=pool, ingress=ingress, stream=stream)


def _size(block: Any) -> int:
    if isinstance(block, TextBlock):
        return len(block.text)
    if isinstance(block, ThinkingBlock):
        return 0 if block.redacted else len(block.text)
    if isinstance(block, ToolResultBlock):
        return sum(_size(b) for b in block.content)
    return 0


#: The ``prompt: ro|rw`` view: ``(system, messages)``, ``system`` ``None`` when the request has none.
Prompt = tuple[str | None, list[dict[str, str]]]


def prompt_view(ir: IrRequest) -> Prompt:
    """``(system, messages)`` of the ``prompt: ro|rw`` grant; ``system`` is ``None`` when absent."""
    system = None
    if ir.system:
        system, _ = _flatten(ir.system)
    messages = [{"role": m.role, "text": _flatten(m.content)[0]} for m in ir.messages]
    return system, messages


def user_view(identity: Any, end_user: str | None) -> dict[str, str]:
    """``request.user`` of the ``user: ro`` grant: ``key_id``/``key_name`` of the resolved key
    record (``identity``; ``None`` before governance) and the body's end-user field. The caller's
    credential is never read here."""
    out: dict[str, str] = {}
    if identity is not None:
        key_id = getattr(identity, "key_id", None)
        key_name = getattr(identity, "key_name", None)
        if isinstance(key_id, str) and key_id:
            out["key_id"] = key_id
        if isinstance(key_name, str) and key_name:
            out["key_name"] = key_name
    if isinstance(end_user, str) and end_user:
        out["user"] = end_user
    return out


def candidate_static(member: Any, cost: float | None) -> dict[str, Any]:
    """The config-derived part of one ``candidates[]`` entry (``idx`` .. ``cost_per_mtok``, wire
    order), built once per member at boot: none of these fields changes while the gateway runs.

    Args:
        member: a ``busbar.proxy.runtime.Member``.
        cost: its ``cost_per_mtok`` (``None`` when unpriced).
    """
    lane = member.lane
    c: dict[str, Any] = {"idx": member.index, "model": lane.name, "provider": lane.provider.name,
                         "weight": member.weight}
    if member.context_max is not None:
        c["context_max"] = member.context_max
    if member.tier is not None:
        c["tier"] = member.tier
    if member.tags:
        c["tags"] = tuple(member.tags)
    if cost is not None:
        c["cost_per_mtok"] = cost
    return c


_NO_STATICS: Mapping[int, dict[str, Any]] = {}


def candidate_views(members: Iterable[Any], costs: Mapping[int, float | None],
                    statics: Mapping[int, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One ``candidates[]`` entry per member of ``members`` (already filtered to the healthy ones),
    every entry a new dict (its ``tags`` a new list) the receiving hook may mutate.

    Args:
        members: ``busbar.proxy.runtime.Member`` objects.
        costs: member index -> ``cost_per_mtok`` (precomputed at boot from the rate card).
        statics: member index -> :func:`candidate_static` of that member, when the caller built
            them at boot (a pool's chain); members missing from it are built here.
    """
    out = []
    get = (statics if statics is not None else _NO_STATICS).get
    for m in members:
        base = get(m.index)
        if base is None:
            base = candidate_static(m, costs.get(m.index))
        c = base.copy()
        if "tags" in c:
            c["tags"] = list(c["tags"])
        lane = m.lane
        latency = lane.latency_ms
        if latency is not None:
            c["latency_ms"] = round(latency * 1000.0) / 1000.0    # to the µs; round(x, 3) is 4x slower
        cap = lane.max_concurrent           # available_permits(lane), inlined: once per member per request
        if cap is None:
            c["available_concurrency"] = UNBOUNDED_PERMITS - lane.inflight
        else:
            free = cap - lane.inflight
            c["available_concurrency"] = free if free > 0 else 0
        out.append(c)
    return out


def stage_view(at: str, **fields: Any) -> dict[str, Any]:
    """``stage``: ``{"at": at, ...}`` with the ``None`` fields left out (absent, not null)."""
    out: dict[str, Any] = {"at": at}
    for k, v in fields.items():
        if v is not None:
            out[k] = v
    return out


def copy_candidates(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A structural copy of a ``candidates`` list (each entry and its ``tags`` list new), so one
    plugin mutating its payload can never change what another hook sees (strings and numbers are
    immutable and shared)."""
    out = []
    for c in candidates:
        c2 = dict(c)
        tags = c2.get("tags")
        if tags is not None:
            c2["tags"] = list(tags)
        out.append(c2)
    return out
