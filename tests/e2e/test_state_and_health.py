"""BUSBAR_STATE_FILE survives a restart (and a corrupt file is ignored); health probes recover lanes."""
from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from tests.support.gateway import BusbarProcess
from tests.support.waiting import wait_until

STATE_CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  st-a: { provider: oa, max_requests: 10 }
  st-b: { provider: oa }
pools:
  sticky:
    members: [ { model: st-a, weight: 100 }, { model: st-b } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1 }, base_cooldown_secs: 60, max_cooldown_secs: 60 }
"""

HEALTH_CONFIG = """
listen: "127.0.0.1:{port}"
metrics: { buffer_seconds: 60 }
providers:
  probed:
    protocol: openai
    base_url: MOCK
    api_key: { env: T_OPENAI_KEY }
    health: { mode: dead, interval_secs: 1, timeout_secs: 2 }
  active:
    protocol: openai
    base_url: MOCK
    api_key: { env: T_OPENAI_KEY }
    health: { mode: active, interval_secs: 1 }
models:
  hp-a: { provider: probed }
  hp-b: { provider: probed }
  act: { provider: active, upstream_model: act-wire }
pools:
  healthy:
    members: [ { model: hp-a, weight: 100 }, { model: hp-b } ]
  actpool: { members: [ { model: act } ] }
"""
KEYS = {"T_OPENAI_KEY": "sk-test-openai"}
MSG = [{"role": "user", "content": "hi"}]


def target(gw) -> str:
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    return client.chat.completions.with_raw_response.create(model="sticky", messages=MSG) \
        .headers["x-busbar-route-target"]


@pytest.mark.slow
def test_open_breaker_and_budget_survive_restart(tmp_path, mock):
    state = tmp_path / "state.json"
    cfg = STATE_CONFIG.replace("MOCK", mock.url)
    env = {**KEYS, "BUSBAR_STATE_FILE": str(state)}
    with BusbarProcess(cfg, tmp_path, env=env) as gw:
        assert target(gw) == "st-a"                          # budget 10 -> 9
        mock.script([{"match": {"model": "st-a"}, "times": 1, "response": {"status": 500}}])
        assert target(gw) == "st-b"                          # st-a opens for ~60 s
    saved = json.loads(state.read_text())
    cells = {(c["pool"], c["lane"]): c for c in saved["cells"]}
    assert cells[("sticky", "st-a")]["state"] == "open"
    assert cells[("sticky", "st-a")]["cooldown_until"] > time.time() + 40
    lanes = {lane["lane"]: lane for lane in saved["lanes"]}
    assert lanes["st-a"]["budget"] == 9 and lanes["st-a"]["max_requests"] == 10
    mock.clear()
    with BusbarProcess(cfg, tmp_path, env=env) as gw:
        assert [target(gw) for _ in range(3)] == ["st-b"] * 3   # still open after the restart
    assert [r["body"]["model"] for r in mock.requests()] == ["st-b"] * 3


def test_corrupt_state_file_is_reported_and_ignored(tmp_path, mock):
    state = tmp_path / "state.json"
    state.write_text("{not json")
    cfg = STATE_CONFIG.replace("MOCK", mock.url)
    with BusbarProcess(cfg, tmp_path, env={**KEYS, "BUSBAR_STATE_FILE": str(state),
                                           "BUSBAR_LOG": "info"}) as gw:
        assert target(gw) == "st-a"
        assert f"state file {state} is corrupt or unreadable" in gw.logs()


def test_empty_state_file_env_disables_persistence(tmp_path, mock):
    cfg = STATE_CONFIG.replace("MOCK", mock.url)
    with BusbarProcess(cfg, tmp_path, env={**KEYS, "BUSBAR_STATE_FILE": ""}) as gw:
        target(gw)
    assert not list(tmp_path.glob("*.json"))


@pytest.fixture(scope="module")
def hgw(gateway_factory, mock):
    return gateway_factory(HEALTH_CONFIG, mock.url, env=KEYS)


def lane_state(gw, pool, lane) -> float:
    for line in httpx.get(gw.url + "/metrics").text.splitlines():
        if line.startswith("busbar_lane_state{") and f'pool="{pool}"' in line and f'lane="{lane}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no such gauge")


def test_dead_mode_probe_recovers_a_hard_down_lane(hgw, mock):
    mock.script([{"match": {"model": "hp-a"}, "times": 1, "response": {"status": 401}}])
    client = openai.OpenAI(base_url=hgw.url + "/v1", api_key="x", max_retries=0)
    first = client.chat.completions.with_raw_response.create(model="healthy", messages=MSG)
    assert first.headers["x-busbar-route-target"] == "hp-b"        # hp-a hard-down (1800 s)
    assert lane_state(hgw, "healthy", "hp-a") == 2
    deadline = time.time() + 5
    while time.time() < deadline and lane_state(hgw, "healthy", "hp-a") != 0:
        time.sleep(0.2)
    assert lane_state(hgw, "healthy", "hp-a") == 0                  # the probe's 2xx recovered it
    probes = [r for r in mock.requests() if r["body"].get("model") == "hp-a" and r["body"].get("max_tokens") == 1]
    assert probes, "no probe reached the upstream"
    again = client.chat.completions.with_raw_response.create(model="healthy", messages=MSG)
    assert again.headers["x-busbar-route-target"] == "hp-a"


def test_active_mode_probes_every_interval_with_upstream_model(hgw, mock):
    probes = wait_until(lambda: [r for r in mock.requests() if r["body"].get("model") == "act-wire"][1:] and
                        [r for r in mock.requests() if r["body"].get("model") == "act-wire"],
                        timeout=6.0, interval=0.1, what="two active-mode probes")
    assert len(probes) >= 2
    assert probes[0]["body"]["messages"] == [{"role": "user", "content": "ping"}]
    assert probes[0]["headers"]["authorization"] == "Bearer sk-test-openai"
    assert not [r for r in mock.requests() if r["body"].get("model") == "hp-b"]   # dead mode: healthy lanes idle
