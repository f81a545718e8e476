"""Breaker transition and hard-down logs (docs/operations.md#state-change-logs): through a real busbar a
lane's breaker is logged open, half-open and closed once each; a flapping lane is rate-limited (on a
real gateway built from config text, its cells driven directly)."""
from __future__ import annotations

import logging

import httpx
import openai
from busbar.config.load import load_config_text
from busbar.observe.watch import PER_MINUTE, BreakerWatch
from busbar.proxy.gateway import Gateway
from busbar.server.app import AppState

from tests.support.waiting import wait_until

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  wa: { provider: up-openai }
  wb: { provider: up-openai }
  wd: { provider: up-anthropic }
pools:
  watched:
    members: [ { model: wa, weight: 1000 }, { model: wb, weight: 1 } ]
    breaker:
      trip: { mode: consecutive, consecutive_n: 1 }
      base_cooldown_secs: 1
      max_cooldown_secs: 1
"""
ERR_500 = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}


def _lines(gw, needle: str) -> list[str]:
    return [ln.split(": ", 1)[1] for ln in gw.logs().splitlines() if " busbar.breaker: " in ln and needle in ln]


def test_open_half_open_closed_and_hard_down_are_logged_once_each(gateway_factory, mock):
    gw = gateway_factory(CONFIG, mock.url, env={"BUSBAR_LOG": "info"})
    mock.script([{"match": {"model": "wa"}, "times": 1, "response": {"status": 500, "body": ERR_500}},
                 {"match": {"model": "wd"}, "times": 1, "response": {"status": 401}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    client.chat.completions.create(model="watched", messages=[{"role": "user", "content": "x"}])  # wa fails over
    wait_until(lambda: _lines(gw, "breaker open"), timeout=5, what="open")   # logged by a finisher, after the reply
    (opened,) = _lines(gw, "breaker open")
    assert opened.startswith("breaker open: pool 'watched' lane 'wa' (cooldown ")
    wait_until(lambda: _lines(gw, "breaker half-open"), timeout=5, what="half-open")
    assert _lines(gw, "breaker half-open") == [
        "breaker half-open: pool 'watched' lane 'wa' (cooldown over; the next request probes it)"]
    for _ in range(3):
        client.chat.completions.create(model="watched", messages=[{"role": "user", "content": "x"}])
    wait_until(lambda: _lines(gw, "breaker closed"), what="closed")
    assert _lines(gw, "breaker closed") == ["breaker closed: pool 'watched' lane 'wa' (recovered)"]
    r = httpx.post(gw.url + "/v1/messages", json={"model": "wd", "max_tokens": 5,
                                                  "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code >= 400
    wait_until(lambda: _lines(gw, "hard-down for"), what="hard-down")
    (down,) = _lines(gw, "hard-down for")
    assert down.startswith("lane 'wd' hard-down for 1")
    assert down.endswith("s (an auth or billing failure; a health probe recovers it)")


def test_a_flapping_lane_is_rate_limited(caplog):
    loaded = load_config_text(CONFIG.replace("MOCK", "http://127.0.0.1:9").replace("{port}", "0"),
                              {"T_OPENAI_KEY": "k", "T_ANTHROPIC_KEY": "k"})
    now = [1000.0]
    gw = Gateway.build(loaded, {"T_OPENAI_KEY": "k", "T_ANTHROPIC_KEY": "k"}, clock=lambda: now[0],
                       transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    watch = BreakerWatch(AppState(gateway=gw), clock=lambda: now[0])
    watch.check()                                        # first sight: nothing logged
    cell = gw.pools["watched"].members[0].cell
    with caplog.at_level(logging.INFO, logger="busbar.breaker"):
        for _ in range(10):                              # ten open/close flaps within a minute
            cell.record_failure(now[0])
            watch.check({"wa"})
            cell.recover()
            watch.check({"wa"})
            now[0] += 1
        lines = [r.getMessage() for r in caplog.records if "'wa'" in r.getMessage()]
        assert len(lines) == PER_MINUTE
        now[0] += 61
        cell.record_failure(now[0])
        watch.check({"wa"})
    last = [r.getMessage() for r in caplog.records if "'wa'" in r.getMessage()][-1]
    assert last.endswith(f"({20 - PER_MINUTE} earlier change(s) of this lane not logged: rate limit)")
    assert last.startswith("breaker open: pool 'watched' lane 'wa'")

