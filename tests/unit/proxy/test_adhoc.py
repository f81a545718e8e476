"""The ad-hoc lane cache (busbar.proxy.adhoc): bound, LRU order, eviction preference, metric label."""
from __future__ import annotations

import pytest
from busbar.proxy.adhoc import AdhocLanes
from busbar.proxy.runtime import Provider

PROV = Provider("up", "anthropic", None, "http://x", None, None, None, {}, "k")
OTHER = Provider("up2", "anthropic", None, "http://y", None, None, None, {}, "k")


def test_bound_holds_and_least_recently_used_goes_first():
    cache = AdhocLanes(lambda: 100.0, capacity=3)
    a, b, c = (cache.get(PROV, n) for n in "abc")
    assert cache.get(PROV, "a") is a              # a hit marks "a" recent: "b" is now the oldest
    cache.get(PROV, "d")
    assert len(cache) == 3
    assert cache.get(PROV, "a") is a and cache.get(PROV, "c") is c
    assert cache.get(PROV, "b") is not b          # "b" was evicted: a fresh lane
    assert len(cache) == 3


def test_same_model_at_two_providers_is_two_lanes_with_provider_labels():
    cache = AdhocLanes(lambda: 0.0)
    one, two = cache.get(PROV, "m"), cache.get(OTHER, "m")
    assert one is not two and (one.name, two.name) == ("m", "m")
    assert (one.metric_label, two.metric_label) == ("up/*", "up2/*")
    assert one.upstream_model == "m" and one.budget == -1 and one.max_concurrent is None


def test_cooling_and_busy_lanes_are_kept_while_an_idle_healthy_one_exists():
    now = 100.0
    cache = AdhocLanes(lambda: now, capacity=3)
    cooling, busy, healthy = cache.get(PROV, "cooling"), cache.get(PROV, "busy"), cache.get(PROV, "ok")
    cooling.default_cell.record_failure(now, retry_after=60.0)
    assert not cooling.default_cell.admits(now)
    busy.acquire()
    cache.get(PROV, "new")
    assert cache.get(PROV, "cooling") is cooling and cache.get(PROV, "busy") is busy
    assert cache.get(PROV, "ok") is not healthy


def test_bound_holds_when_no_lane_is_idle_and_healthy():
    now = 100.0
    cache = AdhocLanes(lambda: now, capacity=2)
    first, second = cache.get(PROV, "x"), cache.get(PROV, "y")
    first.hard_down_until = second.hard_down_until = now + 60
    cache.get(PROV, "z")
    assert len(cache) == 2
    assert cache.get(PROV, "y") is second and cache.get(PROV, "x") is not first


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="ad-hoc lane cache capacity must be >= 1, got 0"):
        AdhocLanes(lambda: 0.0, capacity=0)
