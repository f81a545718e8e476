"""A reply served through a ``fallback_pool`` hop is charged to the pool that served it
(docs/limits.md#settlement): the group-wide buckets count it once, the pool-scoped buckets of the
serving pool count it and its spend, those of the admitted pool are refunded. Exact counters through
the admin groups report and the spend metric."""
from __future__ import annotations

import httpx
import pytest

from tests.limits.test_limits_e2e import _metric, _openai_body

pytestmark = pytest.mark.e2e

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  gpt: { provider: oa }
  spare: { provider: oa, upstream_model: spare-1 }
pools:
  p: { members: [ { model: gpt } ], on_exhausted: { fallback_pool: q },
       breaker: { trip: { mode: consecutive, consecutive_n: 1 }, base_cooldown_secs: 300, max_cooldown_secs: 300 } }
  q: { members: [ { model: spare } ] }
rate_card:
  gpt: { input_utok: 1.0, output_utok: 3.0 }
  spare: { input_utok: 2.0, output_utok: 4.0 }
metrics: { buffer_seconds: 60 }
groups:
  g: { limits: [ { requests: 100, per: hour }, { requests: 5, per: hour, pool: p },
                 { requests: 5, per: hour, pool: q }, { budget: 1000000, per: day, pool: p },
                 { budget: 1000000, per: day, pool: q } ] }
"""


def _used(gw) -> dict[str, tuple[int, int]]:  # noqa: ANN001
    rows = gw.admin.get("/groups/g").json()["limits"]
    return {r["bucket"] + ":" + r["metric"]: (r["used"], r["reserved"]) for r in rows}


def test_a_fallback_hop_is_charged_to_the_pool_that_served(gateway_factory, mock) -> None:
    gw = gateway_factory(CONFIG, mock.url, "g")
    mock.script([{"match": {"model": "gpt"}, "times": -1, "response": {"status": 503}},
                 {"match": {"model": "spare-1"}, "times": -1, "response": {"body": _openai_body(900, 200)}}])
    body = {"model": "p", "max_tokens": 500, "messages": [{"role": "user", "content": "hi"}]}
    first = httpx.post(gw.url + "/v1/chat/completions", headers=gw.headers, timeout=10, json=body)
    assert first.status_code == 503                 # p's only member fails: its breaker opens (refunded)
    r = httpx.post(gw.url + "/v1/chat/completions", headers=gw.headers, timeout=10, json=body)
    assert r.status_code == 200                     # p exhausted: its fallback pool q serves
    assert [req["body"]["model"] for req in mock.requests()] == ["gpt", "spare-1"]
    assert _used(gw) == {
        "group:g@hour:requests": (1, 0),          # group-wide: once (the 503 was refunded)
        "group:g@hour#p:requests": (0, 0),        # admitted through p, not served there: refunded
        "group:g@hour#q:requests": (1, 0),        # served by q: charged there
        "group:g@day#p:budget": (0, 0),
        "group:g@day#q:budget": (900 * 2 + 200 * 4, 0),     # spare's rates: 2 600 µ
    }
    assert _metric(gw, "busbar_limit_spend_micros_total", pool="q", model="spare") == 2600.0
    assert _metric(gw, "busbar_limit_spend_micros_total", pool="p", model="spare") == 0.0
