"""``GET /healthz?pool=<name>`` through a real busbar: a load balancer can see that the pool it routes
is dead while ``/healthz`` keeps its any-lane-in-any-cell meaning (docs/reliability.md#health-endpoints)."""
from __future__ import annotations

import httpx
import openai
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  hz-a: { provider: up-openai }
  hz-b: { provider: up-anthropic }
  hz-c: { provider: up-openai }
pools:
  dead:
    members: [ { model: hz-a }, { model: hz-b } ]
    breaker:
      trip: { mode: consecutive, consecutive_n: 1 }
      base_cooldown_secs: 300
      max_cooldown_secs: 300
  live: { members: [ { model: hz-c } ] }
"""
ERR_500 = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


def _get(gw, query: str) -> tuple[int, str]:
    r = httpx.get(gw.url + "/healthz" + query)
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    return r.status_code, r.text


def test_unknown_pool_is_404(gw):
    assert _get(gw, "?pool=nope") == (404, "no pool named 'nope'")
    assert _get(gw, "?pool=hz-a") == (404, "no pool named 'hz-a'")      # a model is not a pool
    assert _get(gw, "?pool=") == (404, "no pool named ''")


def test_pool_with_both_lanes_tripped_is_503_while_healthz_stays_ok(gw, mock):
    assert _get(gw, "?pool=dead") == (200, "ok")
    mock.script([{"match": {"model": "hz-a"}, "times": 1, "response": {"status": 500, "body": ERR_500}},
                 {"match": {"model": "hz-b"}, "times": 1, "response": {"status": 500, "body": ERR_500}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError) as ei:     # both members fail: both breakers open
        client.chat.completions.create(model="dead", messages=[{"role": "user", "content": "x"}])
    assert ei.value.status_code == 503
    with pytest.raises(openai.InternalServerError) as ei2:    # now rejected without an upstream call
        client.chat.completions.create(model="dead", messages=[{"role": "user", "content": "x"}])
    assert ei2.value.body["message"] == "pool 'dead': no healthy upstream available; retry later"
    assert _get(gw, "?pool=dead") == (503, "no usable lanes in pool 'dead'")
    assert _get(gw, "?pool=live") == (200, "ok")
    assert _get(gw, "") == (200, "ok")           # the lanes' own direct-route cells are untouched
    direct = client.chat.completions.create(model="hz-a", messages=[{"role": "user", "content": "x"}])
    assert direct.choices[0].message.content == "Hello from hz-a. You said: x"
