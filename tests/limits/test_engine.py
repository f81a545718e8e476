"""The limits engine against a loaded config: all-or-nothing admission (C028), reservations (C027 on
one node), windows and Retry-After, shadow limits, freeze, downgrade, and cost (C029).

docs/limits.md describes every rule checked here.
"""
from __future__ import annotations

from busbar.config.load import load_config_text
from busbar.limits.cost import RateCard, micros
from busbar.limits.engine import Limiter, Refusal, Ticket, Worst
from busbar.limits.tree import GroupTree
from busbar_sdk.store import TierTokens, UsageDelta, UsageLedger

BASE = """
providers:
  up: { protocol: anthropic, base_url: "http://127.0.0.1:9", api_key: { env: K } }
models:
  big: { provider: up }
  small: { provider: up }
pools:
  frontier: { members: [ { model: big } ] }
  value: { members: [ { model: small } ] }
"""


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:   # 2027-01-15T08:00:00Z
        self.t = t

    def __call__(self) -> float:
        return self.t


class Flusher:
    def __init__(self) -> None:
        self.items: list[tuple[str, int, UsageDelta]] = []

    def add_usage(self, bucket: str, start: int, delta: UsageDelta) -> None:
        self.items.append((bucket, start, delta))


def limiter(extra: str, clock: Clock | None = None) -> tuple[Limiter, Flusher]:
    cfg = load_config_text(BASE + extra, {"K": "k"}).config
    flusher = Flusher()
    lim = Limiter(GroupTree(cfg.groups), RateCard(cfg.rate_card, cfg.per_request_fee), flusher=flusher,
                  clock=clock or Clock())
    return lim, flusher


def worst(tokens: int = 0, cost_micros: int = 0) -> Worst:
    return Worst(tokens, cost_micros * 1_000_000)


def counts(lim: Limiter) -> dict[str, tuple[int, int]]:
    return {b: (w.requests, w.billable) for b, w in lim.current.items()}


CHAIN = """
groups:
  acme: { limits: [ { requests: 5, per: minute }, { requests: 100, per: day } ] }
  growth: { parent: acme, limits: [ { requests: 2, per: minute } ] }
  bob: { parent: growth, limits: [ { requests: 3, per: minute }, { concurrent: 5 } ] }
"""


def test_c028_each_distinct_counter_moves_by_exactly_one() -> None:
    lim, flusher = limiter(CHAIN)
    t1 = lim.admit("bob", None, worst())
    assert isinstance(t1, Ticket)
    assert counts(lim) == {"group:bob@minute": (1, 1), "group:growth@minute": (1, 1),
                           "group:acme@minute": (1, 1), "group:acme@day": (1, 1)}
    assert isinstance(lim.admit("bob", None, worst()), Ticket)
    third = lim.admit("bob", None, worst())
    assert isinstance(third, Refusal)
    assert (third.status, third.kind, third.message) == (
        429, "rate_limit", "group 'growth': requests per minute exceeded (limit 2)")
    assert third.retry_after == 60                       # 08:00:00 -> the minute rolls in 60 s
    # the refused request used no other limit's quota
    assert counts(lim) == {"group:bob@minute": (2, 2), "group:growth@minute": (2, 2),
                           "group:acme@minute": (2, 2), "group:acme@day": (2, 2)}
    assert lim.inflight == {"bob": 2, "growth": 2, "acme": 2}
    assert flusher.items == []                           # the ledger hears of a request when it ends
    lim.settle(t1, True, "big", TierTokens(input=5))
    assert flusher.items == [] and lim.drain() == 4      # settled usage waits for the drain
    assert [(b, d.requests, d.billable_requests, d.models) for b, _, d in flusher.items] == [
        ("group:bob@minute", 1, 1, {"big": TierTokens(input=5)}), ("group:growth@minute", 1, 1, {"big": TierTokens(input=5)}),
        ("group:acme@minute", 1, 1, {"big": TierTokens(input=5)}), ("group:acme@day", 1, 1, {"big": TierTokens(input=5)})]


def test_non_2xx_refunds_the_request_and_releases_the_gauge() -> None:
    lim, flusher = limiter(CHAIN)
    t = lim.admit("bob", None, worst())
    assert isinstance(t, Ticket)
    lim.settle(t, False, None, None)
    lim.settle(t, False, None, None)                      # idempotent
    lim.drain()
    assert counts(lim)["group:growth@minute"] == (1, 0)
    assert lim.inflight == {"bob": 0, "growth": 0, "acme": 0}
    assert lim.reservations == 0
    assert [(b, d.requests, d.billable_requests, d.models) for b, _, d in flusher.items] == [
        ("group:bob@minute", 1, 0, {}), ("group:growth@minute", 1, 0, {}), ("group:acme@minute", 1, 0, {}),
        ("group:acme@day", 1, 0, {})]
    assert isinstance(lim.admit("bob", None, worst()), Ticket)
    assert isinstance(lim.admit("bob", None, worst()), Ticket)   # the refunded one frees its slot


def test_the_window_rolls_in_civil_utc() -> None:
    clock = Clock()
    lim, _ = limiter(CHAIN, clock)
    for _ in range(2):
        assert isinstance(lim.admit("bob", None, worst()), Ticket)
    clock.t += 45
    r = lim.admit("bob", None, worst())
    assert isinstance(r, Refusal) and r.retry_after == 15
    clock.t += 15
    assert isinstance(lim.admit("bob", None, worst()), Ticket)
    assert counts(lim)["group:acme@day"] == (3, 3)


def test_concurrent_is_an_in_flight_gauge_without_retry_after() -> None:
    lim, _ = limiter("groups:\n  g: { limits: [ { concurrent: 1 } ] }\n")
    t = lim.admit("g", None, worst())
    assert isinstance(t, Ticket)
    r = lim.admit("g", None, worst())
    assert isinstance(r, Refusal)
    assert (r.status, r.message, r.retry_after) == (429, "group 'g': concurrent exceeded (limit 1)", None)
    lim.settle(t, True, None, None)
    assert isinstance(lim.admit("g", None, worst()), Ticket)


def test_c027_reservations_admit_exactly_two_of_five() -> None:
    """$0.0100 left, worst case $0.004 each: 2 admitted, 3 refused; spend + holds never pass 10 000 µ."""
    lim, _ = limiter("groups:\n  g: { limits: [ { budget: 10000, per: month } ] }\n")
    verdicts = [lim.admit("g", None, worst(cost_micros=4000)) for _ in range(5)]
    admitted = [v for v in verdicts if isinstance(v, Ticket)]
    refused = [v for v in verdicts if isinstance(v, Refusal)]
    assert len(admitted) == 2 and len(refused) == 3
    assert refused[0].kind == "quota"
    assert refused[0].message == "group 'g': budget per month is exhausted (budget 10000)"
    win = lim.current["group:g@month"]
    assert micros(win.spend + win.reserved_cost) == 8000
    for t in admitted:                                   # each really costs $0.0015
        lim.settle(t, True, "big", TierTokens(input=1500))
    assert win.reserved_cost == 0
    assert lim.spent_micros(win) == 0                    # no rate card: tokens price 0


def test_c027_with_a_rate_card() -> None:
    card = "rate_card:\n  big: { input_utok: 1.0, output_utok: 3.0 }\n  small: { input_utok: 1.0, output_utok: 3.0 }\n"
    lim, _ = limiter(card + "groups:\n  g: { limits: [ { budget: 10000, per: month } ] }\n")
    verdicts = [lim.admit("g", None, worst(cost_micros=4000)) for _ in range(5)]
    admitted = [v for v in verdicts if isinstance(v, Ticket)]
    assert len(admitted) == 2
    for t in admitted:
        lim.settle(t, True, "big", TierTokens(input=900, output=200))     # 900 + 600 = 1500 µ
    win = lim.current["group:g@month"]
    assert (lim.spent_micros(win), win.reserved_cost) == (3000, 0)
    assert isinstance(lim.admit("g", None, worst(cost_micros=4000)), Ticket)   # the next one fits again


def test_tokens_limits_reserve_the_worst_case_too() -> None:
    lim, _ = limiter("groups:\n  g: { limits: [ { tokens: 1000, per: day } ] }\n")
    t = lim.admit("g", None, worst(tokens=600))
    assert isinstance(t, Ticket)
    r = lim.admit("g", None, worst(tokens=600))
    assert isinstance(r, Refusal) and r.message == "group 'g': tokens per day exceeded (limit 1000)"
    lim.settle(t, True, "big", TierTokens(input=100, output=50))
    assert isinstance(lim.admit("g", None, worst(tokens=600)), Ticket)


def test_per_request_fee_counts_billable_requests() -> None:
    lim, _ = limiter("per_request_fee: 100\ngroups:\n  g: { limits: [ { budget: 250, per: total } ] }\n")
    a, b = lim.admit("g", None, worst()), lim.admit("g", None, worst())
    r = lim.admit("g", None, worst())
    assert isinstance(a, Ticket) and isinstance(b, Ticket) and isinstance(r, Refusal)
    assert r.retry_after is None                          # total never rolls
    lim.settle(a, False, None, None)                      # non-2xx: the fee is refunded
    assert isinstance(lim.admit("g", None, worst()), Ticket)


def test_frozen_and_unconfigured_groups_are_403_naming_them() -> None:
    lim, _ = limiter("groups:\n  org: { enabled: false }\n  team: { parent: org }\n")
    r = lim.admit("team", None, worst())
    assert isinstance(r, Refusal)
    assert (r.status, r.message) == (403, "group 'org' is frozen (enabled: false)")
    r = lim.admit("gone", None, worst())
    assert isinstance(r, Refusal)
    assert (r.status, r.message) == (
        403, "group 'gone' is not configured in the running config; the request is refused")
    assert lim.current == {}


def test_shadow_limits_count_but_never_refuse() -> None:
    lim, _ = limiter("groups:\n  g: { limits: [ { requests: 1, per: hour, shadow: true } ] }\n")
    seen = []
    lim.on_shadow = seen.append
    for _ in range(3):
        assert isinstance(lim.admit("g", None, worst()), Ticket)
    assert [(s.group, s.metric, s.per) for s in seen] == [("g", "requests", "hour")] * 2


def test_the_most_restrictive_repeat_wins() -> None:
    lim, _ = limiter("groups:\n  g: { limits: [ { requests: 5, per: minute }, { requests: 1, per: minute } ] }\n")
    assert isinstance(lim.admit("g", None, worst()), Ticket)
    r = lim.admit("g", None, worst())
    assert isinstance(r, Refusal) and r.message == "group 'g': requests per minute exceeded (limit 1)"


POOLED = """
groups:
  dev:
    limits:
      - { budget: 5000, per: month, pool: frontier, on_exhaust: downgrade, downgrade_to: value }
      - { budget: 5000, per: month, pool: value }
"""


def test_pool_scoped_budgets_and_downgrade() -> None:
    lim, _ = limiter(POOLED)
    t = lim.admit("dev", "frontier", worst(cost_micros=4000))
    assert isinstance(t, Ticket) and t.pool == "frontier"
    t2 = lim.admit("dev", "frontier", worst(cost_micros=4000))     # frontier spent: re-admitted via value
    assert isinstance(t2, Ticket) and t2.pool == "value"
    assert [w.bucket for w in t2.windows] == ["group:dev@month#value"]
    denied = lim.admit("dev", "frontier", worst(cost_micros=4000), reprice=lambda p: None if p == "value" else worst(cost_micros=4000))
    assert isinstance(denied, Refusal)                   # the ACL re-check: the plain quota refusal
    assert denied.message == "group 'dev': budget per month in pool 'frontier' is exhausted (budget 5000)"
    both = lim.admit("dev", "frontier", worst(cost_micros=4000))
    assert isinstance(both, Refusal)
    assert both.message == "group 'dev': budget per month in pool 'value' is exhausted (budget 5000)"


def test_seeding_from_the_ledger() -> None:
    card = "rate_card:\n  big: { input_utok: 2.0 }\n  small: { input_utok: 1.0 }\n"
    clock = Clock()
    lim, _ = limiter(card + "groups:\n  g: { limits: [ { budget: 1000, per: day } ] }\n", clock)
    day = 1_800_000_000 - 1_800_000_000 % 86400
    lim.seed("group:g@day", day, UsageLedger(3, 3, {"big": TierTokens(input=400)}))
    assert lim.spent_micros(lim.current["group:g@day"]) == 800
    assert isinstance(lim.admit("g", None, worst(cost_micros=200)), Ticket)
    assert isinstance(lim.admit("g", None, worst(cost_micros=1)), Refusal)


def test_c029_cache_write_tokens_are_charged_once() -> None:
    card = RateCard(load_config_text(BASE + "rate_card:\n  big: { input_utok: 3.0, output_utok: 15.0, "
                                            "cache_read_utok: 0.3, cache_write_utok: 3.75 }\n  small: {}\n",
                                     {"K": "k"}).config.rate_card)
    rates = card.rates_of("big")
    assert rates is not None
    pico = card.cost_pico(rates, TierTokens(input=3, output=550, cache_read=0, cache_write=12304))
    assert pico == 54_399_000_000
    assert abs(pico / 1e12 - 0.054399) < 1e-9
    assert card.rates_of("unpriced") is None
    assert RateCard(None).rates_of("anything") is not None


def test_a_restarted_node_seeds_its_counters_from_the_store_ledger() -> None:
    import asyncio

    from busbar.limits.gate import Limits
    from busbar_sdk.store import MemoryStore, UsageItem
    from busbar_sdk.store.windows import window_start

    cfg = load_config_text(BASE + "rate_card:\n  big: { input_utok: 1.0 }\n  small: {}\n"
                                  "groups:\n  g: { limits: [ { budget: 1000, per: day }, { requests: 3, per: minute } ] }\n",
                           {"K": "k"}).config
    store = MemoryStore()
    now = 1_800_000_000

    async def run() -> tuple[int, Limits]:
        await store.open()
        await store.add_usage([UsageItem("group:g@day", window_start("day", now),
                                         UsageDelta(2, 2, {"big": TierTokens(input=700)})),
                               UsageItem("group:g@minute", window_start("minute", now), UsageDelta(2, 2)),
                               UsageItem("group:g@minute", window_start("minute", now) - 60, UsageDelta(9, 9))])
        limits = Limits(cfg)
        limits.limiter.clock = lambda: now
        return await limits.seed_from(store), limits

    n, limits = asyncio.run(run())
    assert n == 2
    lim = limits.limiter
    assert lim.spent_micros(lim.current["group:g@day"]) == 700
    assert (lim.current["group:g@minute"].requests, lim.current["group:g@minute"].billable) == (2, 2)
    assert isinstance(lim.admit("g", None, worst(cost_micros=300)), Ticket)      # 700 + 300 = 1000
    assert isinstance(lim.admit("g", None, worst()), Refusal)                     # the 3rd request of the minute


def test_headroom_is_the_tightest_fraction_and_the_least_budget_left() -> None:
    card = "rate_card:\n  big: { input_utok: 1.0 }\n  small: {}\n"
    lim, _ = limiter(card + """groups:
  org: { limits: [ { budget: 1000, per: month }, { requests: 10, per: minute } ] }
  team: { parent: org, limits: [ { budget: 500, per: day, pool: frontier }, { requests: 4, per: hour, shadow: true } ] }
""")
    assert lim.headroom("team", "frontier") == (500, 1.0)
    assert lim.headroom("team", None) == (1000, 1.0)
    t = lim.admit("team", "frontier", worst(cost_micros=100))
    assert isinstance(t, Ticket)
    assert lim.headroom("team", "frontier") == (400, 0.9)       # 100 reserved on both budgets
    lim.settle(t, True, "big", TierTokens(input=30))
    assert lim.headroom("team", "frontier") == (470, 0.9)
    assert lim.headroom("nobody", None) == (0, 0.0)
    lim2, _ = limiter("groups:\n  free: {}\n")
    assert lim2.headroom("free", None) == (None, None)


def test_a_live_config_apply_keeps_the_counters_and_reprices_spend() -> None:
    import httpx
    from busbar.limits.gate import carry_limits
    from busbar.proxy.gateway import Gateway

    def gateway(rate: float, cap: int):  # noqa: ANN202
        text = BASE + f"rate_card:\n  big: {{ input_utok: {rate} }}\n  small: {{}}\n" \
                      f"groups:\n  g: {{ limits: [ {{ budget: {cap}, per: month }}, {{ concurrent: 5 }} ] }}\n"
        return Gateway.build(load_config_text(text, {"K": "k"}), {"K": "k"},
                             transport=httpx.MockTransport(lambda r: httpx.Response(500)))

    old, new = gateway(1.0, 1000), gateway(2.0, 800)
    assert old.limiter is not None and new.limiter is not None
    done = old.limiter.limiter.admit("g", None, worst(cost_micros=50))
    open_ = old.limiter.limiter.admit("g", None, worst(cost_micros=100))
    assert isinstance(done, Ticket) and isinstance(open_, Ticket)
    old.limiter.limiter.settle(done, True, "big", TierTokens(input=200))
    carry_limits(old, new)
    lim = new.limiter.limiter
    win = lim.current["group:g@month"]
    assert lim.spent_micros(win) == 400                    # 200 tokens repriced at 2 µ/token
    assert (lim.reservations, lim.inflight["g"], micros(win.reserved_cost)) == (1, 1, 100)
    assert lim.headroom("g", None) == (300, 0.8)           # the new cap: 800 - 400 - 100 held
    from types import SimpleNamespace

    from busbar.ir.model import Usage
    record = SimpleNamespace(status=200, first_byte=1.0, stream=False, lane="big", usage=Usage(input_tokens=10),
                             attempts=[])
    old.limiter.settle(old, open_, record)                 # admitted on the old config
    assert (lim.reservations, lim.inflight["g"], lim.spent_micros(win)) == (0, 0, 420)   # settled here


FALLBACK = """
rate_card:
  big: { input_utok: 1.0, output_utok: 1.0 }
  small: { input_utok: 2.0, output_utok: 2.0 }
groups:
  g: { limits: [ { requests: 10, per: hour }, { requests: 5, per: hour, pool: frontier },
                 { requests: 5, per: hour, pool: value } ] }
"""


def test_a_fallback_hop_charges_the_pool_that_served_and_refunds_the_admitted_one() -> None:
    lim, flusher = limiter(FALLBACK)
    t = lim.admit("g", "frontier", worst(tokens=50))
    assert isinstance(t, Ticket) and [w.bucket for w in t.windows] == ["group:g@hour", "group:g@hour#frontier"]
    lim.settle(t, True, "small", TierTokens(input=10), served="value")
    assert counts(lim) == {"group:g@hour": (1, 1), "group:g@hour#frontier": (1, 0), "group:g@hour#value": (1, 1)}
    assert lim.current["group:g@hour#value"].spend == 20 * 1_000_000            # 10 tokens at 2 µ
    assert lim.current["group:g@hour#frontier"].spend == 0
    assert (lim.reservations, lim.current["group:g@hour#frontier"].reserved_tokens) == (0, 0)
    assert lim.drain() == 3
    start = lim.current["group:g@hour"].start
    assert flusher.items == [("group:g@hour", start, UsageDelta(1, 1, {"small": TierTokens(input=10)})),
                             ("group:g@hour#frontier", start, UsageDelta(1, 0)),
                             ("group:g@hour#value", start, UsageDelta(1, 1, {"small": TierTokens(input=10)}))]


SWEPT = """
groups:
  g: { limits: [ { requests: 100, per: minute }, { requests: 100, per: minute, pool: frontier } ] }
  tmp: { limits: [ { requests: 100, per: minute }, { concurrent: 5 } ] }
"""


def _sweeping(every: int, clock: Clock) -> Limiter:
    cfg = load_config_text(BASE + SWEPT, {"K": "k"}).config
    return Limiter(GroupTree(cfg.groups), RateCard(None), clock=clock, sweep_every=every)


def test_every_n_admissions_the_rolled_idle_windows_are_swept_and_live_counters_kept() -> None:
    clock = Clock()
    lim = _sweeping(4, clock)
    t = lim.admit("g", "frontier", worst())                        # 1st admission
    assert isinstance(t, Ticket)
    lim.settle(t, True, None, None)
    clock.t += 120                                                  # both minute windows rolled
    for _ in range(2):                                              # 2nd, 3rd: no sweep yet
        assert isinstance(lim.admit("g", None, worst()), Ticket)
    assert set(lim.current) == {"group:g@minute", "group:g@minute#frontier"}
    assert isinstance(lim.admit("g", None, worst()), Ticket)       # 4th: the sweep runs first
    assert counts(lim) == {"group:g@minute": (3, 3)}               # the live window untouched, then charged
    assert "group:g@minute#frontier" in lim.buckets               # still configured: only its window went
    t = lim.admit("g", "frontier", worst())                        # the bucket starts a fresh window
    assert isinstance(t, Ticket) and counts(lim)["group:g@minute#frontier"] == (1, 1)


def test_a_window_holding_a_reservation_is_not_swept() -> None:
    clock = Clock()
    lim = _sweeping(2, clock)
    open_ = lim.admit("g", "frontier", worst(tokens=10))           # never settled before the sweep
    clock.t += 120
    assert isinstance(lim.admit("g", None, worst()), Ticket)       # 2nd: sweep
    held = lim.current["group:g@minute#frontier"]
    assert (held.requests, held.reserved_tokens) == (1, 10)
    assert isinstance(open_, Ticket)
    lim.settle(open_, True, None, None)
    assert held.reserved_tokens == 0


def test_buckets_and_gauges_of_a_group_gone_from_the_tree_leave_memory_once_idle() -> None:
    clock = Clock()
    lim = _sweeping(1, clock)                                      # sweep at every admission
    t = lim.admit("tmp", None, worst())
    assert isinstance(t, Ticket) and "tmp" in lim.inflight
    cfg = load_config_text(BASE + SWEPT.replace("  tmp:", "  gone:"), {"K": "k"}).config
    lim.tree = GroupTree({"g": cfg.groups["g"]})                  # an auto-provisioned group removed
    lim.settle(t, True, None, None)
    assert isinstance(lim.admit("g", None, worst()), Ticket)       # tmp's window is still live: kept
    assert "group:tmp@minute" in lim.current and "tmp" not in lim.inflight    # its idle gauge went
    clock.t += 120
    assert isinstance(lim.admit("g", None, worst()), Ticket)
    assert set(lim.buckets) == {"group:g@minute"}                  # tmp's bucket swept out of memory
    assert counts(lim) == {"group:g@minute": (1, 1)}
