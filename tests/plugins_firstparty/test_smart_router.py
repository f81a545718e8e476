"""examples/hooks/smart-router: the docs/hooks-firstparty.md policy, in-process (signed tarball) and as a sidecar
(``python -m busbar_sdk.sidecar smart_router:plugin`` in its own process), byte-identical.

Source: docs/hooks-firstparty.md#the-smart-router-example (classify / score / sort; the two worked requests);
docs/hooks.md#what-a-hook-receives; docs/hooks-firstparty.md#busbar-webrequest-hook.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import httpx
import pytest
from busbar_sdk.testing import assert_hook_conformance

from tests.plugins_firstparty.conftest import plugin_module
from tests.plugins_firstparty.support import REPO, free_port, per_request, request, wait_listening

# The blog's pool: list prices are real, latencies and free slots are its example live signals.
BLOG_LANES = [
    {"idx": 0, "model": "claude-fable", "provider": "anthropic", "weight": 1, "tier": "fable",
     "cost_per_mtok": 25.0, "latency_ms": 400.0, "available_concurrency": 16},
    {"idx": 1, "model": "claude-opus", "provider": "anthropic", "weight": 1, "tier": "opus",
     "cost_per_mtok": 15.0, "latency_ms": 320.0, "available_concurrency": 12},
    {"idx": 2, "model": "claude-sonnet", "provider": "anthropic", "weight": 1, "tier": "sonnet",
     "cost_per_mtok": 3.0, "latency_ms": 150.0, "available_concurrency": 10},
    {"idx": 3, "model": "claude-haiku", "provider": "anthropic", "weight": 1, "tier": "haiku",
     "cost_per_mtok": 0.8, "latency_ms": 95.0, "available_concurrency": 6},
]
REQUEST_A = per_request("decide", request(pool="my-smart-model", message_count=6, has_tools=True, total_chars=5200,
                                          max_tokens=1024, stream=True), BLOG_LANES)
REQUEST_B = per_request("decide", request(pool="my-smart-model", message_count=1, total_chars=800, stream=False),
                        BLOG_LANES)


def lanes(**changes: dict[str, Any]) -> list[dict[str, Any]]:
    out = [dict(c) for c in BLOG_LANES]
    for name, change in changes.items():
        lane = next(c for c in out if c["tier"] == name)
        for k, v in change.items():
            if v is None:
                lane.pop(k, None)
            else:
                lane[k] = v
    return out


# A table of payloads shaped as the kernel sends them (optional fields absent, unknown fields kept).
TABLE = {
    "blog-A-agent": REQUEST_A,
    "blog-B-batch": REQUEST_B,
    "interactive": per_request("decide", request(message_count=4, total_chars=900, stream=True), BLOG_LANES),
    "long-form-by-max-tokens": per_request("decide", request(message_count=2, max_tokens=8192, stream=True),
                                           BLOG_LANES),
    "long-form-by-chars": per_request("decide", request(message_count=12, total_chars=41200, stream=True),
                                      BLOG_LANES),
    "saturated-favourite": per_request("decide", request(has_tools=True, message_count=3),
                                       lanes(fable={"available_concurrency": 0, "latency_ms": 2000.0})),
    "favourite-near-rate-limit": per_request("decide", request(message_count=1),
                                             lanes(haiku={"rate_headroom": 0.02})),
    "missing-signals": per_request("decide", request(message_count=3, stream=True),
                                   lanes(sonnet={"latency_ms": None}, opus={"cost_per_mtok": None},
                                         haiku={"available_concurrency": None})),
    "tags-and-budget": per_request("decide", request(has_tools=True, message_count=2, user_defined_signal=7),
                                   [{"idx": 0, "model": "a", "tags": ["fable", "baa"], "cost_per_mtok": 5.0,
                                     "latency_ms": 100.0, "available_concurrency": 2, "budget_remaining": 10},
                                    {"idx": 1, "model": "b", "cost_per_mtok": 1.0, "latency_ms": 50.0,
                                     "available_concurrency": 8, "rate_headroom": 0.9, "x_signal": "y"}],
                                   {"budget_remaining": 500, "budget": []}, future_member=True),
    "seeds-000-example": per_request("decide", request(pool="smart", ingress_protocol="anthropic", message_count=12,
                                                       has_tools=True, total_chars=41200, max_tokens=8192,
                                                       stream=True),
                                     [{"idx": 0, "model": "claude-opus", "tier": "large", "cost_per_mtok": 15.0,
                                       "latency_ms": 320.5, "available_concurrency": 14, "rate_headroom": 0.82},
                                      {"idx": 1, "model": "claude-sonnet", "tier": "small", "cost_per_mtok": 3.0,
                                       "latency_ms": 95.2, "available_concurrency": 18, "budget_remaining": 5000,
                                       "rate_headroom": 0.55, "tags": ["sonnet"]}]),
    "single-candidate": per_request("decide", request(), [BLOG_LANES[2]]),
    "no-candidates": per_request("decide", request(), []),
    "all-zero-capacity": per_request("decide", request(message_count=2, stream=True),
                                     lanes(**{t: {"available_concurrency": 0} for t in ("fable", "opus", "sonnet",
                                                                                         "haiku")})),
}


@pytest.fixture
def router(load_plugin):
    return load_plugin("smart-router")


def test_walkthrough_a_tools_go_to_fable_first(router) -> None:
    """docs/hooks-firstparty.md#the-smart-router-example, first request: has_tools -> agent/code, favourite fable:
    {"order":[0,2,3,1]}."""
    assert router.open({}).call(REQUEST_A) == {"order": [0, 2, 3, 1]}
    scores = _scores(REQUEST_A)
    assert scores == pytest.approx({0: 0.90, 2: 0.68, 3: 0.65, 1: 0.46}, abs=0.006)


def test_walkthrough_b_single_shot_goes_to_haiku_first(router) -> None:
    """docs/hooks-firstparty.md#the-smart-router-example, second request: one message, no stream -> batch, favourite
    haiku: {"order":[3,2,1,0]}."""
    assert router.open({}).call(REQUEST_B) == {"order": [3, 2, 1, 0]}
    scores = _scores(REQUEST_B)
    assert scores == pytest.approx({3: 1.27, 2: 0.78, 1: 0.49, 0: 0.30}, abs=0.006)


def _scores(payload: dict[str, Any]) -> dict[int, float]:
    policy = plugin_module("smart_router.policy")
    req = payload["request"]
    shape = policy.Shape(has_tools=req["has_tools"], max_tokens=req.get("max_tokens"),
                         total_chars=req["total_chars"], message_count=req["message_count"], stream=req["stream"])
    lanes_ = [policy.Lane(idx=c["idx"], tier=c.get("tier"), tags=tuple(c.get("tags", ())),
                          cost_per_mtok=c.get("cost_per_mtok"), latency_ms=c.get("latency_ms"),
                          available_concurrency=c.get("available_concurrency"),
                          rate_headroom=c.get("rate_headroom")) for c in payload["candidates"]]
    p = policy.Policy()
    bucket = p.buckets[policy.classify(shape, p)]
    return {s["idx"]: s["score"] for s in policy.score_lanes(lanes_, bucket, p)}


def test_the_favourite_gets_a_head_start_not_the_win(router) -> None:
    inst = router.open({})
    assert inst.call(TABLE["saturated-favourite"])["order"][0] != 0  # saturated, slow fable loses
    assert inst.call(TABLE["favourite-near-rate-limit"])["order"][-1] == 3  # haiku trimmed near its limit
    assert inst.call(TABLE["no-candidates"]) == {}


def test_settings_retune_the_policy(router) -> None:
    inst = router.open({"buckets": {"agent": {"favourite": "haiku"}}})
    assert inst.call(REQUEST_A)["order"][0] == 3
    assert inst.configure({"boost": 0}, settings_version=2) == {"ack": {"settings_version": 2}}
    assert inst.call(REQUEST_B)["order"][0] == 2  # without the boost, sonnet's signals win the batch job
    with pytest.raises(Exception, match="unknown bucket"):
        inst.configure({"buckets": {"vip": {}}}, settings_version=3)
    with pytest.raises(Exception, match=r"settings.boost"):
        router.open({"boost": -1})
    status = inst.call({"status": True})["status"]
    assert status["settings_version"] == 2
    assert {m["labels"]["bucket"]: m["value"] for m in status["metrics"]} == {"agent": 1, "batch": 1}


def test_conformance(router) -> None:
    inst = router.open({})
    assert_hook_conformance(inst)
    assert set(inst.call({"describe": True})["schema"]["properties"]) == {
        "boost", "near_limit", "long_form_max_tokens", "long_form_chars", "buckets"}


@pytest.fixture(scope="module")
def router_sidecar():
    """The sidecar as its own process, as an operator runs it."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO / "examples" / "hooks" / "smart-router" / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "busbar_sdk.sidecar", "smart_router:plugin", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(10)


def test_in_process_and_sidecar_decisions_are_byte_identical(router, router_sidecar, load_plugin) -> None:
    inst = router.open({})
    forwarder = load_plugin("webrequest").open({"url": router_sidecar, "timeout_ms": 5000})
    with httpx.Client() as client:
        for name, payload in TABLE.items():
            in_process = json.dumps(inst.call(payload), separators=(",", ":")).encode()
            over_http = client.post(router_sidecar, content=json.dumps(payload)).content
            via_forwarder = json.dumps(forwarder.call(payload), separators=(",", ":")).encode()
            assert over_http == in_process == via_forwarder, name
    forwarder.close()


def test_the_sidecar_entry_point_module_serves_too() -> None:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO / "examples" / "hooks" / "smart-router" / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "smart_router.sidecar", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port)
        reply = httpx.post(f"http://127.0.0.1:{port}/", content=json.dumps(REQUEST_B)).content
    finally:
        proc.terminate()
        proc.wait(10)
    assert reply == b'{"order":[3,2,1,0]}'
