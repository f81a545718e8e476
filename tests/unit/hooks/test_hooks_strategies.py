"""Native strategies: each ranking, its demotions and abstains, and the zero-cost weighted floor.

Source: docs/hooks.md#native-strategies
"""
from __future__ import annotations

import pytest
from busbar.hooks.strategies import STRATEGIES

MEMBERS = """
    members:
      - { model: big, weight: 1 }
      - { model: mid, weight: 5 }
      - { model: small, weight: 1 }
"""


def pool(strategy: str) -> str:
    hooks = f"hooks: [{strategy}]" if strategy else ""
    return f"""
pools:
  p:
    {hooks}
{MEMBERS}"""


async def targets(bed, n=7):
    out = []
    for _ in range(n):
        r = await bed.send("p")
        out.append((r.headers["x-busbar-route-target"], r.headers.get("x-busbar-route-policy")))
    return out


async def test_weighted_is_byte_identical_to_no_list_and_builds_nothing(bed_factory):
    plain = bed_factory(pool(""), plugins=False)
    named = bed_factory(pool("weighted"), plugins=False)
    assert plain.gw.hooks is None and named.gw.hooks is None       # no engine, no chain, no hook object
    a, b = await targets(plain), await targets(named)
    assert a == b == [(t, None) for t in ["mid", "mid", "big", "mid", "small", "mid", "mid"]]
    for x, y in zip([await plain.send("p") for _ in range(3)], [await named.send("p") for _ in range(3)]):
        assert (x.status, x.headers, x.body) == (y.status, y.headers, y.body)


async def test_a_pool_without_hooks_has_no_chain_beside_one_that_has(bed_factory):
    cfg = pool("cheapest") + "  q:\n" + MEMBERS
    bed = bed_factory(cfg, plugins=False)
    assert list(bed.gw.hooks.chains) == ["p"]
    r = await bed.send("q")
    assert "x-busbar-route-policy" not in r.headers


async def test_cheapest_ranks_by_rate_card(bed_factory):
    bed = bed_factory(pool("cheapest"), plugins=False)
    assert await targets(bed, 3) == [("small", "cheapest")] * 3
    bed.gw.pools["p"].members[2].cell.cooldown_until = 1e12       # small tripped: the breaker skips it
    assert await targets(bed, 1) == [("mid", "cheapest")]
    assert 'busbar_route_policy_selections_total{policy="cheapest",pool="p"} 4.0' in bed.gw.metrics.render().decode()


def test_cheapest_demotes_unpriced_and_abstains_when_none_priced():
    class L:
        def __init__(self, name):
            self.name = self.upstream_model = name

    class M:
        def __init__(self, i):
            self.index, self.lane = i, L(str(i))
    ms = [M(0), M(1), M(2)]
    assert STRATEGIES["cheapest"](ms, {0: None, 1: 5.0, 2: 1.0}) == (2, 1, 0)
    assert STRATEGIES["cheapest"](ms, {0: None, 1: None, 2: None}) is None
    assert STRATEGIES["cheapest"](ms, {0: 1.0, 1: 1.0, 2: 0.5}) == (2, 0, 1)   # ties keep config order


async def test_cheapest_without_a_rate_card_abstains(bed_factory):
    from tests.unit.hooks import conftest

    head = conftest.HEAD
    try:
        conftest.HEAD = head.split("rate_card:")[0]
        bed = bed_factory(pool("cheapest"), plugins=False)
    finally:
        conftest.HEAD = head
    assert [t for t, _ in await targets(bed)] == ["mid", "mid", "big", "mid", "small", "mid", "mid"]
    assert {p for _, p in await targets(bed, 2)} == {"weighted"}


async def test_fastest_ranks_by_latency_ewma_demotes_unsampled_abstains_without_data(bed_factory):
    bed = bed_factory(pool("fastest"), plugins=False)
    assert [p for _, p in await targets(bed, 1)] == ["weighted"]   # no sample at all: SWRR
    lanes = bed.gw.lanes
    lanes["big"].latency_ms, lanes["mid"].latency_ms, lanes["small"].latency_ms = 90.0, None, 40.0
    got = STRATEGIES["fastest"](bed.gw.pools["p"].members, {})
    assert got == (2, 0, 1)
    bed.slow_s = 0.0
    r = await bed.send("p")
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("small", "fastest")


async def test_least_busy_prefers_free_permits_and_never_abstains(bed_factory):
    bed = bed_factory(pool("least_busy"), plugins=False)
    lanes = bed.gw.lanes                     # big: max 10, mid: unbounded, small: max 4
    assert STRATEGIES["least_busy"](bed.gw.pools["p"].members, {}) == (1, 0, 2)
    lanes["mid"].inflight = 2 ** 31 - 3
    assert STRATEGIES["least_busy"](bed.gw.pools["p"].members, {}) == (0, 2, 1)
    lanes["mid"].inflight = 0
    r = await bed.send("p")
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("mid", "least_busy")


async def test_usage_abstains_while_no_candidate_has_rate_headroom(bed_factory):
    bed = bed_factory(pool("usage"), plugins=False)
    assert [t for t, _ in await targets(bed)] == ["mid", "mid", "big", "mid", "small", "mid", "mid"]
    assert STRATEGIES["usage"](bed.gw.pools["p"].members, {}) is None


@pytest.mark.parametrize("name", ["cheapest", "fastest", "least_busy", "usage", "weighted"])
def test_every_strategy_abstains_on_an_empty_candidate_set(name):
    assert STRATEGIES[name]([], {}) is None
