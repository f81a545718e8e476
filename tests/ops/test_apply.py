"""Live config apply through a real busbar and SIGHUP (docs/operations.md#changing-config-live): a new
pool member serves after the apply, a bad config is refused with the ``--validate`` lines while the
old one keeps serving, an open breaker stays open across an apply, restart-only keys are reported,
and a pool whose members change ten times under load fails no request."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time

import httpx
import openai
import pytest

from tests.support.gateway import BIN
from tests.support.waiting import wait_until

HEAD = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  ap-a: { provider: up-openai }
  ap-b: { provider: up-openai }
  ap-c: { provider: up-openai }
metrics: { buffer_seconds: 60 }
"""
POOL = """
pools:
  live:
    members: [ %s ]
    breaker:
      trip: { mode: consecutive, consecutive_n: 1 }
      base_cooldown_secs: 600
      max_cooldown_secs: 600
"""
ERR_500 = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}


def _members(*names: str) -> str:
    return POOL % ", ".join(f"{{ model: {n} }}" for n in names)


def _write(gw, text: str) -> None:
    port = gw.url.rsplit(":", 1)[1]
    gw.config_path.write_text(text.replace("{port}", port).replace("MOCK", gw.mock_url))


def _apply(gw, version: int) -> None:
    os.kill(gw.proc.pid, signal.SIGHUP)
    wait_until(lambda: f"version {version} now serving" in gw.logs(), timeout=10,
               what=f"config version {version}")


def _chat(gw, pool: str = "live") -> str:
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    r = client.chat.completions.with_raw_response.create(model=pool, messages=[{"role": "user", "content": "x"}])
    return r.headers["x-busbar-route-target"]


@pytest.fixture
def gw(gateway_factory, mock):
    g = gateway_factory(HEAD + _members("ap-a"), mock.url, env={"BUSBAR_LOG": "info"})
    g.mock_url = mock.url
    return g


def test_a_new_member_serves_after_sighup_and_a_bad_config_keeps_the_old_one(gw, mock):
    assert {_chat(gw) for _ in range(3)} == {"ap-a"}
    _write(gw, HEAD + _members("ap-b"))
    _apply(gw, 2)
    assert {_chat(gw) for _ in range(3)} == {"ap-b"}
    assert "config apply (sighup): version 2 now serving; 1 key(s) changed" in gw.logs()
    metrics = httpx.get(gw.url + "/metrics").text        # counters continue across the swap
    assert 'busbar_requests_total{ingress_protocol="openai",outcome="ok",pool="live"} 6.0' in metrics
    assert 'busbar_lane_state{lane="ap-b",pool="live"} 0.0' in metrics      # gauges read the new gateway
    assert 'busbar_lane_state{lane="ap-a",pool="live"}' not in metrics
    bad = HEAD + _members("ap-b") + "  typo-pool: { members: [ { model: nope } ] }\n"
    _write(gw, bad)
    check = subprocess.run([str(BIN / "busbar"), "--validate", "--config", str(gw.config_path)],
                           env=gw.env, capture_output=True, text=True, timeout=30)
    assert check.returncode == 2
    fault = check.stderr.splitlines()[0]
    os.kill(gw.proc.pid, signal.SIGHUP)
    wait_until(lambda: "version 2 keeps serving" in gw.logs(), timeout=10, what="the refusal")
    assert f"config apply (sighup) refused: {fault}" in gw.logs()
    assert _chat(gw) == "ap-b"                     # the old config keeps serving


def test_an_open_breaker_stays_open_across_an_apply_and_restart_keys_are_reported(gw, mock):
    mock.script([{"match": {"model": "ap-a"}, "times": 1, "response": {"status": 500, "body": ERR_500}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="live", messages=[{"role": "user", "content": "x"}])
    assert httpx.get(gw.url + "/healthz?pool=live").status_code == 503
    _write(gw, HEAD + _members("ap-a") + "limits: { pool_idle_timeout_secs: 30, request_body_max_bytes: 4096 }\n")
    _apply(gw, 2)
    assert httpx.get(gw.url + "/healthz?pool=live").text == "no usable lanes in pool 'live'"   # still open
    assert ("config apply (sighup): version 2 now serving; 2 key(s) changed; restart to apply: "
            "limits.pool_idle_timeout_secs") in gw.logs()
    big = httpx.post(gw.url + "/v1/chat/completions", json={"model": "live", "messages": [], "pad": "x" * 5000})
    assert big.status_code == 413                  # request_body_max_bytes applied live
    _write(gw, HEAD + _members("ap-a", "ap-b"))
    _apply(gw, 3)
    assert {_chat(gw) for _ in range(3)} == {"ap-b"}   # ap-a's cell is still open in pool 'live'


def test_members_change_ten_times_under_load_and_no_request_fails(gw, mock):
    layouts = [("ap-a", "ap-b"), ("ap-b",), ("ap-b", "ap-c"), ("ap-c",), ("ap-a", "ap-c")]
    results: list[int] = []
    stop = threading.Event()

    async def load() -> None:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
            async def worker() -> None:
                while not stop.is_set():
                    r = await client.post("/v1/chat/completions",
                                          json={"model": "live", "messages": [{"role": "user", "content": "x"}]})
                    results.append(r.status_code)
            await asyncio.gather(*(worker() for _ in range(16)))

    runner = threading.Thread(target=asyncio.run, args=(load(),))
    runner.start()
    try:
        for i in range(10):
            time.sleep(0.25)
            _write(gw, HEAD + _members(*layouts[i % len(layouts)]))
            _apply(gw, i + 2)
        time.sleep(0.25)
    finally:
        stop.set()
        runner.join(30)
    assert len(results) > 100
    assert [s for s in results if s != 200] == []
