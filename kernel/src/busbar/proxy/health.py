"""Active health probing: one background task per probing lane.

Per provider ``health: { mode, interval_secs, timeout_secs }`` (catalog value, overridden per
deployment): ``none`` (passive only), ``dead`` (re-probe only lanes that are hard-down or have a
cell that is not closed), ``active`` (probe every lane every interval; one billable request each).
Intervals and timeouts are floored at 1 s; the first tick is skipped. A lane whose credential
resolved empty is never probed. The probe is a one-token request written by the provider's own
dialect for the lane's ``upstream_model``; its outcome runs through the same disposition
pipeline: 2xx recovers the lane in every cell (and clears hard-down), a transient failure is
recorded on every cell of the lane, auth/billing set it hard-down.

Source: docs/reliability.md#health-probing
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import orjson
from busbar_sdk.ssrf import SsrfBlocked

from busbar.ir.model import IrMessage, IrRequest, TextBlock
from busbar.proxy.credentials import CredentialError
from busbar.proxy.disposition import HARD_DOWN, TRANSIENT, classify, effect, parse_retry_after
from busbar.proxy.egress import prepare, read_upstream_error
from busbar.proxy.runtime import Lane
from busbar.proxy.upstream import UpstreamError, fetch

if TYPE_CHECKING:
    from busbar.proxy.gateway import Gateway

log = logging.getLogger("busbar.health")


def probe_body(lane: Lane) -> bytes:
    """The minimal one-token request for ``lane`` in its provider's dialect."""
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("ping")])], max_tokens=1)
    return orjson.dumps(lane.provider.dialect.write_request(ir, lane.upstream_model))


def needs_probe(gw: Gateway, lane: Lane, mode: str) -> bool:
    """``active``: always; ``dead``: only a lane that is hard-down or has a non-closed cell."""
    if mode == "active":
        return True
    now = gw.clock()
    if now < lane.hard_down_until:
        return True
    return any(c.state_at(now) != 0 or now < c.cooldown_until for c in gw.cells_by_lane[lane.name])


async def probe_once(gw: Gateway, lane: Lane, timeout_s: float) -> str:
    """Probe ``lane`` once and apply the outcome; returns ``ok`` or the disposition class."""
    prov = lane.provider
    cells = gw.cells_by_lane[lane.name]
    try:
        url, headers, body = await prepare(gw, prov, lane.upstream_model, False, probe_body(lane))
        status, resp_headers, content = await fetch(gw.upstream, "POST", url, headers, body, timeout_s,
                                                   scope=prov.name)
    except (UpstreamError, TimeoutError, OSError, CredentialError, ValueError, SsrfBlocked) as e:
        cls, status, info, ra = "network", 0, None, None     # SsrfBlocked: the host now resolves to a refused address
        log.info("health probe of %s failed: %s", lane.name, str(e) or type(e).__name__)
    else:
        if status < 300:
            lane.hard_down_until = 0.0
            for cell in cells:
                cell.recover()
            lane.ok += 1
            return "ok"
        info = read_upstream_error(prov.dialect, status, content[: gw.limits.upstream_error_body_max_bytes],
                                   resp_headers)
        cls = classify(status, info, prov.error_map)
        ra = parse_retry_after(resp_headers.get("retry-after"), gw.limits.max_honored_retry_after_secs)
    now = gw.clock()
    kind = effect(cls)
    if kind == TRANSIENT:
        for cell in cells:
            cell.record_failure(now, ra, cls == "rate_limit")
    elif kind == HARD_DOWN:
        secs = gw.limits.hard_down_cooldown_secs
        lane.hard_down_until = max(lane.hard_down_until, now + secs)
        for cell in cells:
            cell.hard_down(now, secs)
    log.info("health probe of %s: %s", lane.name, cls)
    return cls


async def _probe_loop(gw: Gateway, lane: Lane, mode: str, interval: float, timeout: float) -> None:
    while True:
        await asyncio.sleep(interval)
        if needs_probe(gw, lane, mode):
            try:
                await probe_once(gw, lane, timeout)
            except Exception:   # a probe must never kill its loop
                log.exception("health probe of %s raised", lane.name)


def start_probers(gw: Gateway) -> list[asyncio.Task[None]]:
    """Spawn one task per probing lane (providers with mode dead/active and a credential)."""
    tasks: list[asyncio.Task[None]] = []
    for lane in gw.lanes.values():
        health = lane.provider.health or {}
        mode = health.get("mode", "none")
        if mode == "none" or not lane.provider.api_key:
            continue
        interval = max(1, int(health.get("interval_secs", 30)))
        timeout = max(1, int(health.get("timeout_secs", 5)))
        tasks.append(asyncio.ensure_future(_probe_loop(gw, lane, mode, interval, timeout)))
    return tasks
