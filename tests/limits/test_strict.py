"""Strict limits (docs/limits.md#strict-mode) in process: the engine leaves their decision to the store,
``StrictLimits`` decides them all or nothing against a real store, undoes the in-memory admission when
the store refuses or fails, and settles the outcome; the config refuses strict where it cannot apply.
The store here is the in-memory one (the same contract the conformance suite checks on every backend);
tests/limits/test_strict_fleet.py drives real processes on postgres and valkey."""
from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text
from busbar.limits.cost import RateCard
from busbar.limits.engine import Limiter, Ticket, Worst
from busbar.limits.metrics import LimitMetrics
from busbar.limits.strict import StrictLimits
from busbar.limits.tree import GroupTree
from busbar.proto.registry import get_dialect
from busbar_sdk.store import MemoryStore, Store, StoreUnavailable, StrictCounter, StrictRelease, TierTokens

from tests.limits.test_engine import BASE, Clock, counts

NOW = 1_800_000_000          # 2027-01-15T08:00:00Z: the minute window starts here, the hour too
MONTH = 1_798_761_600        # 2027-01-01T00:00:00Z

CHAIN = """
rate_card:
  big: { input_utok: 1.0, output_utok: 3.0 }
  small: { input_utok: 1.0, output_utok: 3.0 }
per_request_fee: 5
groups:
  acme: { limits: [ { budget: 10000, per: month, strict: true }, { requests: 100, per: day } ] }
  bob: { parent: acme, limits: [ { requests: 2, per: minute, strict: true }, { requests: 3, per: hour } ] }
"""


class Broken(MemoryStore):
    async def strict_admit(self, charges: Any) -> int | None:
        raise StoreUnavailable("postgres at postgres://busbar:***@db:5432/busbar is unavailable: refused")


def _setup(store: Any, extra: str = CHAIN) -> tuple[Limiter, StrictLimits, Any, LimitMetrics]:
    cfg = load_config_text(BASE + extra, {"K": "k"}).config
    card = RateCard(cfg.rate_card, cfg.per_request_fee)
    metrics = LimitMetrics(None)
    limiter = Limiter(GroupTree(cfg.groups), card, clock=Clock(float(NOW)), on_refuse=metrics.refused)
    return limiter, StrictLimits(card, metrics), SimpleNamespace(store=store), metrics


def _admit(limiter: Limiter, strict: StrictLimits, gw: Any, cost_micros: int = 0) -> tuple[Any, Any]:
    ticket = limiter.admit("bob", None, Worst(10, cost_micros * 1_000_000, 4, 6))
    assert isinstance(ticket, Ticket)
    return ticket, *asyncio.run(strict.admit(gw, get_dialect("openai"), limiter, ticket))


def test_the_engine_charges_strict_buckets_without_deciding_them_and_cancel_undoes_an_admission() -> None:
    limiter, _, _, _ = _setup(MemoryStore())
    tickets = [limiter.admit("bob", None, Worst(10, 0)) for _ in range(3)]
    assert all(isinstance(t, Ticket) for t in tickets)           # the strict cap of 2 is not the engine's
    assert counts(limiter)["group:bob@minute"] == (3, 3)
    assert limiter.admit("bob", None, Worst(10, 0)).message == \
        "group 'bob': requests per hour exceeded (limit 3)"       # a non-strict limit still is
    for t in tickets:
        limiter.cancel(t)
        limiter.cancel(t)                                         # idempotent
    assert counts(limiter) == {"group:bob@minute": (0, 0), "group:bob@hour": (0, 0), "group:acme@month": (0, 0),
                               "group:acme@day": (0, 0)}
    assert (limiter.reservations, limiter.inflight, limiter.dirty) == (0, {"bob": 0, "acme": 0}, {})
    assert limiter.plan("bob", None).strict == tuple(
        lim for g in limiter.tree.chain("bob") or () for lim in g.limits if lim.strict)
    assert [lim.label for lim in limiter.plan("bob", None).strict] == ["requests per minute",
                                                                                  "budget per month"]


def test_strict_admission_is_all_or_nothing_across_the_store_and_the_node() -> None:
    store = MemoryStore()
    limiter, strict, gw, metrics = _setup(store)
    t1, reply, hold = _admit(limiter, strict, gw, cost_micros=1000)
    assert reply is None and [c.amount for _, c in hold.charges] == [1, 1005]     # worst case + the fee
    assert [(c.bucket, c.window_start, c.expires_at) for _, c in hold.charges] == [
        ("group:bob@minute", NOW, NOW + 60 + 3600), ("group:acme@month", MONTH, 1_801_440_000 + 3600)]
    _, reply, _ = _admit(limiter, strict, gw, cost_micros=1000)
    assert reply is None
    before = counts(limiter)
    _, reply, hold3 = _admit(limiter, strict, gw, cost_micros=1000)
    assert hold3 is None and reply.status == 429 and reply.headers["retry-after"] == "60"
    assert json.loads(reply.body)["error"]["message"] == "group 'bob': requests per minute exceeded (limit 2)"
    assert counts(limiter) == before and limiter.reservations == 2                 # the node's counters undone
    assert asyncio.run(store.strict_get("group:acme@month", MONTH, "budget")) == StrictCounter(0, 2010)
    assert metrics.rejection_counts["requests"] == 1
    # the first request succeeds (a 2xx: its real cost + the fee), the second fails (released, no fee)
    asyncio.run(_settle(strict, gw, hold, ok=True, tiers=TierTokens(100, 50)))
    assert asyncio.run(store.strict_get("group:acme@month", MONTH, "budget")) == StrictCounter(255, 1005)
    assert asyncio.run(store.strict_get("group:bob@minute", NOW, "requests")) == StrictCounter(1, 1)
    limiter.settle(t1, True, "big", TierTokens(100, 50))


async def _settle(strict: StrictLimits, gw: Any, hold: Any, ok: bool, tiers: TierTokens | None) -> None:
    strict.settle(gw, hold, ok, "big" if tiers else None, tiers)
    await strict.close()
    assert not strict.pending


def test_a_budget_refusal_names_the_bucket_in_the_quota_shape() -> None:
    limiter, strict, gw, _ = _setup(MemoryStore())
    _, reply, hold = _admit(limiter, strict, gw, cost_micros=9000)
    assert reply is None and hold is not None
    _, reply, _ = _admit(limiter, strict, gw, cost_micros=1000)          # 9005 + 1005 > 10000
    body = json.loads(reply.body)["error"]
    assert (reply.status, body["code"], body["message"]) == (
        429, "insufficient_quota", "group 'acme': budget per month is exhausted (budget 10000)")
    asyncio.run(_settle(strict, gw, hold, ok=False, tiers=None))          # a refund releases it all
    _, reply, _ = _admit(limiter, strict, gw, cost_micros=1000)
    assert reply is None


def test_a_store_failure_refuses_503_naming_the_group_and_moves_nothing() -> None:
    limiter, strict, gw, metrics = _setup(Broken())
    ticket, reply, hold = _admit(limiter, strict, gw)
    assert hold is None and reply.status == 503
    assert json.loads(reply.body)["error"] == {
        "message": "group 'bob': requests per minute is strict and the store that enforces it is unavailable; "
                   "the request is refused (retry shortly)", "type": "server_error", "param": None, "code": None}
    assert ticket.settled and limiter.reservations == 0
    assert counts(limiter)["group:bob@minute"] == (0, 0)
    assert metrics.strict_failures["admit"] == 1
    assert json.loads(_reply_in(limiter, strict, gw, "anthropic").body)["error"]["type"] == "overloaded_error"


def _reply_in(limiter: Limiter, strict: StrictLimits, gw: Any, dialect: str) -> Any:
    ticket = limiter.admit("bob", None, Worst())
    reply, _ = asyncio.run(strict.admit(gw, get_dialect(dialect), limiter, ticket))
    return reply


def test_a_chain_without_strict_limits_has_no_strict_step() -> None:
    limiter, _, _, _ = _setup(MemoryStore(), "groups:\n  bob: { limits: [ { requests: 2, per: minute } ] }\n")
    assert limiter.plan("bob", None).strict == ()


@pytest.mark.parametrize(("limit", "fault"), [
    ("{ tokens: 5, per: day, strict: true }", "strict applies to requests and budget limits only (not tokens); "
                                              "remove it"),
    ("{ concurrent: 5, strict: true }", "strict applies to requests and budget limits only (not concurrent); "
                                        "remove it"),
    ("{ requests: 5, per: day, strict: true, shadow: true }", "a shadow limit is never enforced, so it cannot be "
                                                              "strict; remove one of them"),
    ("{ budget: 5, per: day, pool: frontier, on_exhaust: downgrade, downgrade_to: value, strict: true }",
     "a strict limit cannot downgrade (on_exhaust: downgrade); remove one of them"),
])
def test_the_config_refuses_strict_where_it_cannot_apply(limit: str, fault: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config_text(BASE + f"groups:\n  g: {{ limits: [ {limit} ] }}\n", {"K": "k"})
    assert f"groups.g.limits[0].strict: {fault}" in str(exc.value)


class Slow(MemoryStore):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def strict_admit(self, charges: Any) -> int | None:
        await asyncio.sleep(self.delay)
        return await super().strict_admit(charges)


def test_an_admission_granted_after_the_timeout_is_refused_503_and_released(monkeypatch: pytest.MonkeyPatch) -> None:
    import busbar.limits.strict as strict_mod

    monkeypatch.setattr(strict_mod, "ADMIT_TIMEOUT_S", 0.05)
    store = Slow(0.2)
    limiter, strict, gw, metrics = _setup(store)

    async def run() -> tuple[Any, Any, Any]:
        ticket = limiter.admit("bob", None, Worst(10, 0))
        reply, hold = await strict.admit(gw, get_dialect("openai"), limiter, ticket)
        await asyncio.sleep(0.3)                              # the store answers "admitted" late ...
        await strict.close()                                  # ... and the release has run
        return reply, hold, await store.strict_get("group:bob@minute", NOW, "requests")

    reply, hold, counter = asyncio.run(run())
    assert (reply.status, hold, counter) == (503, None, StrictCounter(0, 0))
    assert metrics.strict_failures["admit"] == 1 and limiter.reservations == 0


def test_a_request_cancelled_while_the_store_decides_leaves_nothing_held() -> None:
    store = Slow(0.1)
    limiter, strict, gw, _ = _setup(store)

    async def run() -> Any:
        ticket = limiter.admit("bob", None, Worst(10, 0))
        task = asyncio.ensure_future(strict.admit(gw, get_dialect("openai"), limiter, ticket))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.2)
        await strict.close()
        return await store.strict_get("group:bob@minute", NOW, "requests")

    assert asyncio.run(run()) == StrictCounter(0, 0)
    assert limiter.reservations == 0 and counts(limiter)["group:bob@minute"] == (0, 0)


class Old(MemoryStore):
    """A store written before strict counters: the contract's default answers."""

    async def strict_get(self, bucket: str, window_start: int, metric: str) -> StrictCounter:
        return await Store.strict_get(self, bucket, window_start, metric)


def test_boot_refuses_a_strict_limit_on_a_store_without_strict_counters() -> None:
    from busbar.auth.boot import FrontDoorBootError
    from busbar.limits.gate import Limits

    limits = Limits(load_config_text(BASE + CHAIN, {"K": "k"}).config)
    with pytest.raises(FrontDoorBootError) as exc:
        asyncio.run(limits._strict_probe(Old()))
    assert exc.value.faults == [
        "group 'acme': budget per month is strict, but the memory store does not implement strict counters; use "
        "the memory, sqlite, postgres or valkey store, or remove strict: true",
        "group 'bob': requests per minute is strict, but the memory store does not implement strict counters; use "
        "the memory, sqlite, postgres or valkey store, or remove strict: true"]
    asyncio.run(limits._strict_probe(MemoryStore()))          # a store with them: nothing to say


def test_the_groups_report_shows_the_fleet_counter_of_a_strict_limit() -> None:
    from busbar.admin.routes_groups import _fleet, _view
    from busbar.limits.gate import Limits

    limits = Limits(load_config_text(BASE + CHAIN, {"K": "k"}).config)
    store = MemoryStore()
    gw = SimpleNamespace(store=store)
    now = int(limits.limiter.clock())
    asyncio.run(store.strict_admit([limits.strict._charge(lim, 0, now)          # one request of bob's chain
                                    for lim in limits.limiter.plan("bob", None).strict]))
    asyncio.run(store.strict_settle([StrictRelease("group:bob@minute", now - now % 60, "requests", 0, 1)]))
    view = _view(limits, "bob", None, asyncio.run(_fleet(limits, gw, ["bob"])))
    assert view["limits"] == [
        {"metric": "requests", "amount": 2, "per": "minute", "pool": None, "shadow": False, "strict": True,
         "bucket": "group:bob@minute", "used": 1, "reserved": 1, "remaining": 0},      # the store's: the fleet
        {"metric": "requests", "amount": 3, "per": "hour", "pool": None, "shadow": False, "strict": False,
         "bucket": "group:bob@hour", "used": 0, "reserved": 0, "remaining": 3}]        # this node's
    assert asyncio.run(_fleet(limits, SimpleNamespace(store=Old()), ["bob"])) == {}     # unreadable: the node
    assert asyncio.run(_fleet(limits, gw, ["acme"]))[("group:acme@month", "budget")] == {"used": 0, "reserved": 5}


def test_a_strict_budget_settles_operation_units_at_the_rate_card() -> None:
    from busbar.limits.cost import unit_key

    store = MemoryStore()
    extra = CHAIN.replace("big: { input_utok: 1.0, output_utok: 3.0 }",
                          "big: { input_utok: 1.0, output_utok: 3.0, per_image_utok: 40000.0 }")
    limiter, strict, gw, _ = _setup(store, extra)
    _, reply, hold = _admit(limiter, strict, gw, cost_micros=1000)
    assert reply is None

    async def settle() -> None:
        strict.settle(gw, hold, True, "big", TierTokens(10, 0), {unit_key("big", "images"): TierTokens(2)})
        await strict.close()
    asyncio.run(settle())
    # 10 input tokens (10 µ) + 2 images × 40 000 µ + the 5 µ fee
    assert asyncio.run(store.strict_get("group:acme@month", MONTH, "budget")) == StrictCounter(80015, 0)


def test_a_tighter_node_local_repeat_never_turns_a_strict_cap_off() -> None:
    """A strict limit and a node-local one of the same metric and window are both enforced: the
    tighter local one used to displace the strict one (the store was never asked), so the fleet
    passed the strict cap by every node's local allowance."""
    extra = """
groups:
  bob: { limits: [ { requests: 4, per: minute, strict: true }, { requests: 3, per: minute } ] }
"""
    store = MemoryStore()
    limiter, strict, gw, _ = _setup(store, extra)
    assert [(lim.amount, lim.strict) for lim in limiter.tree.chain("bob")[0].limits] == [(4, True), (3, False)]
    assert [lim.label for lim in limiter.plan("bob", None).strict] == ["requests per minute"]
    # the other nodes of the fleet have used 4 of the strict cap this minute; this node has used none
    asyncio.run(store.strict_settle([StrictRelease("group:bob@minute", NOW, "requests", 0, 4)]))
    _, reply, hold = _admit(limiter, strict, gw)
    assert hold is None and reply.status == 429
    assert json.loads(reply.body)["error"]["message"] == "group 'bob': requests per minute exceeded (limit 4)"
    assert asyncio.run(store.strict_get("group:bob@minute", NOW, "requests")) == StrictCounter(4, 0)
    store2 = MemoryStore()
    limiter2, strict2, gw2, _ = _setup(store2, extra)
    for _ in range(3):                                            # the node-local cap of 3 still holds
        assert _admit(limiter2, strict2, gw2)[1] is None
    refused = limiter2.admit("bob", None, Worst(10, 0))
    assert refused.message == "group 'bob': requests per minute exceeded (limit 3)"
