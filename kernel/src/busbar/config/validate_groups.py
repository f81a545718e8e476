"""Validation of ``groups:`` (the limit tree), group limits, ``rate_card:`` and ``per_request_fee``.

Rows (docs/configuration.md#startup-checks): Groups tree faults (a missing parent with a paste-ready
stub, a cycle with its path printed, a chain deeper than 8 groups), Malformed group limit (not exactly
one metric key, a windowed metric without per:, concurrent with per:), Rate card incomplete (a
paste-ready zeroed stub per missing model, and per model serving an operation the card prices per unit
elsewhere: UNIT_RATES); and the field rules of docs/config-at-a-glance.md#groups: a pool: scope
must name an existing pool, concurrent takes no pool:, on_exhaust: downgrade needs downgrade_to (a
different existing pool), a pool: scope and the budget metric; strict: true only on a requests or budget limit that is
neither shadow nor downgrading; child_default limits follow the same rules.

Depth counts groups on the chain leaf to root inclusive: a root alone is 1 deep; 9 is refused at the
group where the chain first exceeds 8.
"""
from __future__ import annotations

import math
from typing import Any

import yaml

from busbar.config.operations import lane_operations

MAX_DEPTH = 8
_WINDOWED = ("requests", "tokens", "budget")
_STRICT = ("requests", "budget")


def yaml_key(name: str) -> str:
    """``name`` as a YAML mapping key, quoted only when plain YAML would misread it."""
    text = yaml.safe_dump(name, default_flow_style=True, width=10_000).strip()
    return text[:-3].strip() if text.endswith("...") else text


def _limit(ctx: Any, path: str, lim: Any) -> None:
    pools = ctx.cfg.pools
    metrics = lim.metrics()
    if len(metrics) != 1:
        found = ", ".join(metrics) if metrics else "none"
        ctx.err(path, f"a limit has exactly one metric key (requests, tokens, budget or concurrent), "
                      f"found {found}; write one limit per metric")
    for m in metrics:
        if getattr(lim, m) < 0:
            ctx.err(f"{path}.{m}", f"{getattr(lim, m)} is negative; must be ≥ 0")
    if "budget" in metrics and ctx.cfg.rate_card is None and ctx.cfg.per_request_fee == 0:
        ctx.warn(f"{path}.budget", "no rate_card and per_request_fee 0: every request's spend is 0, so this budget "
                                   "never binds; add a rate_card (or a per_request_fee)")
    windowed = [m for m in metrics if m in _WINDOWED]
    if windowed and lim.per is None:
        ctx.err(f"{path}.per", f"{windowed[0]} needs a window; add per: minute | hour | day | month | total")
    if "concurrent" in metrics:
        if lim.per is not None:
            ctx.err(f"{path}.per", "concurrent is instantaneous and takes no per:; remove it")
        if lim.pool is not None:
            ctx.err(f"{path}.pool", "concurrent takes no pool: (the in-flight gauge is per group); remove it")
    if lim.pool is not None and lim.pool not in pools:
        ctx.err(f"{path}.pool", f"'{lim.pool}' is not a configured pool (it would be an unenforced "
                                f"budget); fix the name or remove pool:")
    if lim.on_exhaust == "downgrade":
        if lim.budget is None:
            ctx.err(f"{path}.on_exhaust", "downgrade applies to a budget limit only; use it on "
                                          "{ budget: N, per: ..., pool: ... }")
        if lim.pool is None:
            ctx.err(f"{path}.on_exhaust", "downgrade needs a pool: scope (the pool being downgraded from)")
        if lim.downgrade_to is None:
            ctx.err(f"{path}.downgrade_to", "required by on_exhaust: downgrade; name the cheaper pool")
        elif lim.downgrade_to not in pools:
            ctx.err(f"{path}.downgrade_to", f"'{lim.downgrade_to}' is not a configured pool; fix the name")
        elif lim.downgrade_to == lim.pool:
            ctx.err(f"{path}.downgrade_to", f"'{lim.downgrade_to}' is the limit's own pool; name a "
                                            f"different pool")
    elif lim.downgrade_to is not None:
        ctx.err(f"{path}.downgrade_to", "only meaningful with on_exhaust: downgrade; add it or remove "
                                        "downgrade_to")
    if lim.strict:
        _strict(ctx, path, lim, metrics)


def _strict(ctx: Any, path: str, lim: Any, metrics: list[str]) -> None:
    """``strict: true``: requests or budget only, never with shadow or a downgrade."""
    if metrics and metrics[0] not in _STRICT:
        ctx.err(f"{path}.strict", f"strict applies to requests and budget limits only (not {metrics[0]}); "
                                  f"remove it")
    if lim.shadow:
        ctx.err(f"{path}.strict", "a shadow limit is never enforced, so it cannot be strict; remove one of them")
    if lim.on_exhaust == "downgrade":
        ctx.err(f"{path}.strict", "a strict limit cannot downgrade (on_exhaust: downgrade); remove one of them")


def _depth_chain(groups: dict[str, Any], name: str) -> list[str] | None:
    """Leaf-to-root chain of ``name``; None when it ends in a missing parent or a cycle."""
    chain = [name]
    cur = groups[name].parent
    while cur is not None:
        if cur not in groups or cur in chain:
            return None
        chain.append(cur)
        cur = groups[cur].parent
    return chain


def _tree(ctx: Any) -> None:
    groups = ctx.cfg.groups
    order = list(groups)
    for name, g in groups.items():
        if g.parent is None:
            continue
        if g.parent == name:
            ctx.err(f"groups.{name}.parent", f"'{name}' is its own parent; remove parent: or name another group")
        elif g.parent not in groups:
            ctx.err(f"groups.{name}.parent", f"'{g.parent}' is not a configured group; add it (paste under "
                                             f"groups:) {yaml_key(g.parent)}: {{ limits: [] }}  or fix "
                                             f"the name")
    for name in groups:  # cycles, once each, at the first member in config order
        chain = [name]
        cur = groups[name].parent
        while cur in groups and cur not in chain:
            chain.append(cur)
            cur = groups[cur].parent
        if cur is None or cur not in chain:
            continue  # reached a root, or a missing parent (reported above)
        cycle = chain[chain.index(cur):]
        if len(cycle) > 1 and cycle[0] == name and min(cycle, key=order.index) == name:
            ctx.err(f"groups.{name}.parent", f"group cycle {' -> '.join(cycle + [name])}; remove one "
                                             f"parent to break it")
    for name in groups:
        depth = _depth_chain(groups, name)
        if depth is not None and len(depth) == MAX_DEPTH + 1:
            ctx.err(f"groups.{name}.parent", f"the chain {' -> '.join(depth)} is {len(depth)} groups deep; "
                                             f"at most {MAX_DEPTH} are allowed: re-parent a group closer "
                                             f"to the root")


def _rate_card(ctx: Any) -> None:
    cfg = ctx.cfg
    if cfg.per_request_fee < 0:
        ctx.err("per_request_fee", f"{cfg.per_request_fee} is negative; must be ≥ 0 (default 0)")
    if cfg.rate_card is None:
        return
    for model, entry in cfg.rate_card.items():
        for tier in ("input_utok", "output_utok", "cache_read_utok", "cache_write_utok", "per_image_utok",
                     "per_audio_second_utok", "per_character_utok", "per_search_unit_utok"):
            value = getattr(entry, tier)
            if not math.isfinite(value) or value < 0:
                ctx.err(f"rate_card.{model}.{tier}", f"{value} is not allowed; a rate is a finite number ≥ 0")
    priced = {field: op for field, op in UNIT_RATES.items()
              if any(field in e.model_fields_set for e in cfg.rate_card.values())}
    for model, m in cfg.models.items():
        serves = lane_operations(ctx.protocol_of_model(model) or "", m.operations)
        entry = cfg.rate_card.get(model)
        need = [f for f, op in priced.items() if op in serves and (entry is None or f not in entry.model_fields_set)]
        if entry is None:
            stub = ", ".join(f"{f}: 0.0" for f in ("input_utok", "output_utok", *need))
            ctx.err("rate_card", f"no entry for model '{model}' (a present rate_card must price every "
                                 f"configured model); paste under rate_card:  {yaml_key(model)}: {{ {stub} }}")
        elif need:
            ops = sorted({priced[f] for f in need})
            ctx.err(f"rate_card.{model}", f"model '{model}' serves {', '.join(ops)}, which the rate card prices "
                                          f"per unit for other models; price it here too (0.0 for free): "
                                          f"add {', '.join(f'{f}: 0.0' for f in need)}")


UNIT_RATES = {"per_image_utok": "images", "per_audio_second_utok": "audio", "per_character_utok": "audio",
              "per_search_unit_utok": "rerank"}
"""Each per-operation rate of a rate card entry and the operation it prices. All or nothing, like the
card itself: once any entry sets one, every model serving that operation must set it (0.0 = free)."""


def check(ctx: Any) -> None:
    """The group tree, every limit (and child_default limit), then rate_card and per_request_fee."""
    _tree(ctx)
    for name, g in ctx.cfg.groups.items():
        for i, lim in enumerate(g.limits):
            _limit(ctx, f"groups.{name}.limits[{i}]", lim)
        if g.child_default is not None:
            for i, lim in enumerate(g.child_default.limits):
                _limit(ctx, f"groups.{name}.child_default.limits[{i}]", lim)
    _rate_card(ctx)
