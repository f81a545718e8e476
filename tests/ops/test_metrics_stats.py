"""Prometheus additions and ``/stats`` through a real busbar (docs/operations.md#prometheus-metrics,
docs/operations.md#stats): latency and TTFB histograms per pool and protocol, the windowed latency
summary of ``metrics.buffer_seconds``, upstream attempt latency per lane, tokens by pool and model,
inbound concurrency; ``/stats`` with breaker state per cell."""
from __future__ import annotations

import math
import re

import httpx
import openai
import pytest
from busbar.observe.window import WindowedSummary

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  ms-a: { provider: up-openai, max_concurrent: 4 }
  ms-b: { provider: up-openai }
pools:
  measured:
    members: [ { model: ms-a, weight: 1000 }, { model: ms-b, weight: 1 } ]
    breaker:
      trip: { mode: consecutive, consecutive_n: 1 }
      base_cooldown_secs: 600
      max_cooldown_secs: 600
metrics: { buffer_seconds: 30 }
"""
ERR_500 = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}


def _value(text: str, series: str) -> float:
    m = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert m, f"{series} not in /metrics"
    return float(m.group(1))


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


def test_latency_tokens_and_concurrency_metrics(gw, mock):
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    usage = [client.chat.completions.create(model="measured", messages=[{"role": "user", "content": "hi"}]).usage
             for _ in range(3)]
    text = httpx.get(gw.url + "/metrics").text
    labels = 'ingress_protocol="openai",pool="measured"'
    assert _value(text, f"busbar_request_duration_seconds_count{{{labels}}}") == 3.0
    assert _value(text, f"busbar_request_ttfb_seconds_count{{{labels}}}") == 3.0
    inf = 'busbar_request_duration_seconds_bucket{ingress_protocol="openai",le="+Inf",pool="measured"}'
    assert _value(text, inf) == 3.0
    assert _value(text, f"busbar_request_latency_window_seconds_count{{{labels}}}") == 3.0
    p50 = _value(text, f'busbar_request_latency_window_seconds{{{labels},quantile="0.5"}}')
    assert 0 < p50 < 10
    assert _value(text, 'busbar_upstream_attempt_duration_seconds_count{lane="ms-a"}') == 3.0
    assert _value(text, 'busbar_tokens_total{direction="input",model="ms-a",pool="measured"}') == sum(
        u.prompt_tokens for u in usage)
    assert _value(text, 'busbar_tokens_total{direction="output",model="ms-a",pool="measured"}') == sum(
        u.completion_tokens for u in usage)
    assert _value(text, "busbar_inbound_inflight") == 0.0
    assert "latency quantiles over the last 30 s (metrics.buffer_seconds)" in text


def test_stats_shows_each_lane_and_cell(gw, mock):
    mock.script([{"match": {"model": "ms-a"}, "times": 1, "response": {"status": 500, "body": ERR_500}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    client.chat.completions.create(model="measured", messages=[{"role": "user", "content": "hi"}])   # fails over
    r = httpx.get(gw.url + "/stats")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    assert doc["config_version"] == 1
    lanes = {lane["lane"]: lane for lane in doc["lanes"]}
    assert set(lanes) == {"ms-a", "ms-b"}
    a = lanes["ms-a"]
    assert (a["provider"], a["inflight"], a["max_concurrent"], a["hard_down_secs"], a["budget"]) == (
        "up-openai", 0, 4, 0.0, -1)
    (pool_cell, own_cell) = a["cells"]
    assert (pool_cell["pool"], pool_cell["state"]) == ("measured", "open")
    assert 500 < pool_cell["cooldown_secs"] <= 600
    assert own_cell == {"pool": None, "state": "closed", "cooldown_secs": 0.0}
    assert lanes["ms-b"]["cells"][0]["state"] == "closed"
    assert lanes["ms-b"]["latency_ewma_ms"] > 0


def test_windowed_summary_forgets_observations_older_than_the_window():
    now = [100.0]
    w = WindowedSummary("w", "doc", ["pool"], window_s=10, clock=lambda: now[0])
    for v in (1.0, 2.0, 3.0, 4.0):
        w.observe(("p",), v)
    now[0] = 105.0
    w.observe(("p",), 10.0)
    samples = {(s.name, s.labels.get("quantile")): s.value for s in next(iter(w.collect())).samples}
    assert samples[("w", "0.5")] == 3.0 and samples[("w", "0.99")] == 10.0
    now[0] = 112.0                                  # the first four are past the 10 s window
    samples = {(s.name, s.labels.get("quantile")): s.value for s in next(iter(w.collect())).samples}
    assert samples[("w", "0.5")] == 10.0
    assert (samples[("w_sum", None)], samples[("w_count", None)]) == (20.0, 5)   # cumulative
    now[0] = 200.0
    samples = {(s.name, s.labels.get("quantile")): s.value for s in next(iter(w.collect())).samples}
    assert math.isnan(samples[("w", "0.5")])


def test_stats_behind_the_auth_chain_shows_only_the_callers_pools(gateway_factory, mock):
    from tests.support.gateway import free_port

    admin_port = free_port()
    yaml = CONFIG.replace("metrics: { buffer_seconds: 30 }\n", "") + (
        "  other: { members: [ { model: ms-b } ] }\n"
        f'admin_listen: "127.0.0.1:{admin_port}"\n'
        "auth:\n  chain: [keys]\n  admin_auth: [ { admin-tokens: { token: { env: T_ADMIN } } } ]\n")
    gw = gateway_factory(yaml, mock.url, env={"T_ADMIN": "adm-secret"})
    minted = httpx.post(f"http://127.0.0.1:{admin_port}/api/v1/admin/keys",
                        headers={"authorization": "Bearer adm-secret"},
                        json={"name": "stats-reader", "allowed_pools": ["other"]})
    assert minted.status_code in (200, 201), minted.text
    token = minted.json()["token"]
    stranger = httpx.get(gw.url + "/stats")
    assert stranger.status_code == 401
    assert stranger.json()["error"]["code"] == "invalid_api_key"
    doc = httpx.get(gw.url + "/stats", headers={"authorization": f"Bearer {token}"}).json()
    assert [(lane["lane"], [c["pool"] for c in lane["cells"]]) for lane in doc["lanes"]] == [("ms-b", ["other"])]
