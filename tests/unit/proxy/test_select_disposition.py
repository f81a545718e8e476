"""SWRR order, affinity, and the disposition classifier."""
from busbar.config.schema import BreakerConfig, MemberConfig, ModelConfig, PoolConfig
from busbar.proto.base import UpstreamErrorInfo
from busbar.proxy.breaker import BreakerCell
from busbar.proxy.disposition import classify, effect, parse_retry_after
from busbar.proxy.runtime import Lane, Member, Pool, Provider
from busbar.proxy.select import affinity_pick, swrr_pick


def pool(weights, max_concurrent=None):
    prov = Provider("p", "openai", None, "http://x", None, None, None, {}, "k")
    members = []
    for i, w in enumerate(weights):
        lane = Lane(chr(97 + i), prov, ModelConfig(provider="p", max_concurrent=max_concurrent),
                    BreakerCell(BreakerConfig()))
        members.append(Member(lane, MemberConfig(model=lane.name, weight=w), BreakerCell(BreakerConfig()), i))
    return Pool("pool", PoolConfig(members=[MemberConfig(model=m.lane.name) for m in members]), members)


def test_swrr_5_1_1_is_smooth():
    p = pool([5, 1, 1])
    seq = "".join(swrr_pick(p, 0.0, set()).lane.name for _ in range(7))
    assert seq == "aabacaa"


def test_swrr_skips_unusable_and_redistributes():
    p = pool([1, 1, 1], max_concurrent=1)
    p.members[0].lane.acquire()                      # a is at capacity
    p.members[2].cell.cooldown_until = 100.0         # c is cooling down
    assert {swrr_pick(p, 0.0, set()).lane.name for _ in range(4)} == {"b"}
    assert swrr_pick(p, 0.0, {1}) is None


def test_affinity_is_sticky_while_usable():
    p = pool([1, 1, 1])
    first = affinity_pick(p, "session-42", 0.0, set())
    assert all(affinity_pick(p, "session-42", 0.0, set()) is first for _ in range(5))
    first.cell.cooldown_until = 10.0
    assert affinity_pick(p, "session-42", 0.0, set()) is None      # falls back to SWRR


def test_classify_status_classes_and_error_map():
    info = UpstreamErrorInfo("1113", "insufficient balance")
    assert classify(429, None, {}) == "rate_limit"
    assert classify(401, None, {}) == "auth" and classify(403, None, {}) == "auth"
    assert classify(529, None, {}) == "overloaded" and classify(502, None, {}) == "server_error"
    assert classify(408, None, {}) == "timeout"
    assert classify(404, UpstreamErrorInfo("model_not_found", "no model"), {}) == "client_error"
    assert classify(400, info, {"1113": "billing"}) == "billing"
    ctx = UpstreamErrorInfo("context_length_exceeded", "maximum context length is 4097 tokens")
    assert classify(400, ctx, {}) == "context_length"
    assert classify(500, ctx, {"context_length_exceeded": "context_length"}) == "server_error"
    assert [effect(c) for c in ("rate_limit", "auth", "client_error", "context_length")] == \
        ["transient_upstream", "hard_down", "client_error", "context_length"]


def test_retry_after_parsing():
    assert parse_retry_after("7", 86400) == 7.0
    assert parse_retry_after("999999", 100) == 100
    assert parse_retry_after("garbage", 100) is None and parse_retry_after(None, 100) is None
    assert 0 < parse_retry_after("Wed, 21 Oct 2099 07:28:00 GMT", 86400) <= 86400
