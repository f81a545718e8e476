"""The AI router's decision cache and call budget across a fleet: two ``busbar`` processes on one
store, the first-party signed ``busbar-ai-router-hook`` tarball on both (engine ``decision``:
local, offline), traffic with plain HTTP against the mock provider.

- ``budget: {max_calls_per_minute: 2}`` is the fleet's: across both processes exactly 2 model
  calls, every later request served by the fallback chain (reason ``budget``); a decision one
  process made is served from the store by the other (``cache="store"``), spending nothing;
- the store down at run time (a TCP relay cut): every request is still routed, by the process's
  own cache and budget, and the faults are counted in ``busbar_router_store_errors_total``; once
  the store answers again, the calls made meanwhile count in the fleet's minute.

Source: docs/router.md#cache-and-budget-across-a-fleet, docs/plugins.md#shared-state.
"""
from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.fleet.conftest import ROOT, fleet_yaml
from tests.fleet.tcpproxy import TcpProxy
from tests.fleet.test_fleet import metric, start_nodes
from tests.support.gateway import BusbarProcess
from tests.support.waiting import wait_until

HOOK = "busbar-ai-router-hook"
ROUTER = f"""\
  m-math: {{ provider: oa }}
  m-chat: {{ provider: oa }}
pools:
  ai:
    members: [ {{ model: m-math, tags: [math] }}, {{ model: m-chat }} ]
    hooks:
      - module: {HOOK}
        prompt: ro
        timeout_ms: 3000
        settings:
          timeout: 2000
          temperature: 0.05
          budget: {{ max_calls_per_minute: 2 }}
          fallback: [ {{ rules: [], default: [m-chat] }} ]
          candidates:
            - {{ name: math, description: "Mathematics: equations, derivatives, integrals, proofs.", examples: ["Solve 2x + 3 = 7", "What is the integral of x^2?"] }}
            - {{ name: m-chat, description: "Casual conversation and small talk: greetings, jokes.", examples: ["Hi, how are you?", "Tell me a joke"] }}
"""
PROMPTS = ["Solve x^2 - 5x + 6 = 0", "What is the derivative of x^3?", "Integrate sin(x) from 0 to pi",
           "Prove that the square root of 2 is irrational", "Solve the equation 3x + 7 = 22 for x"]


@pytest.fixture
def router_dir(plugins_dir: Path, tmp_path: Path) -> Path:
    """The fleet's store tarballs plus the first-party AI router."""
    out = tmp_path / "plugins"
    shutil.copytree(plugins_dir, out)
    shutil.copy(ROOT / "dist" / "plugins" / f"{HOOK}-1.5.0.tar.gz", out)
    return out


def config(module: str, settings: dict, mock_url: str, plugins: Path) -> str:
    return fleet_yaml(module, settings, mock_url, plugins).replace("  gpt: { provider: oa }\n", ROUTER)


def target(node: BusbarProcess, text: str) -> str:
    r = httpx.post(node.url + "/v1/chat/completions", timeout=30,
                   json={"model": "ai", "messages": [{"role": "user", "content": text}]})
    assert r.status_code == 200, r.text
    return str(r.headers["x-busbar-route-target"])


def early_in_a_minute() -> None:
    """Wait until the clock minute has 40 s left (the budget's window must not turn over mid-test)."""
    second = time.time() % 60
    if second > 20:
        time.sleep(60 - second + 0.5)


def counts(node: BusbarProcess) -> dict[str, float]:
    return {"model": metric(node, "busbar_router_decisions_total", served_by="model"),
            "budget": metric(node, "busbar_router_fallback_total", reason="budget"),
            "local": metric(node, "busbar_router_cache_hits_total", cache="local"),
            "store": metric(node, "busbar_router_cache_hits_total", cache="store"),
            "errors": sum(metric(node, "busbar_router_store_errors_total", op=op)
                          for op in ("cache_get", "cache_put", "budget"))}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "valkey"])
def test_two_processes_share_one_budget_and_one_cache(tmp_path: Path, mock, router_dir: Path, store_config,
                                                      backend: str) -> None:
    module, settings = store_config(backend)
    yaml = config(module, settings, mock.url, router_dir)
    a, b = start_nodes(2, yaml, tmp_path, env={"BUSBAR_LOG": "info"})
    try:
        early_in_a_minute()
        assert target(a, PROMPTS[0]) == "m-math"          # fleet call 1, cached in the store
        assert target(b, PROMPTS[0]) == "m-math"          # b: from the store, no call
        assert target(b, PROMPTS[1]) == "m-math"          # fleet call 2
        assert target(a, PROMPTS[2]) == "m-chat"          # over the fleet's budget: fallback[0]
        assert target(b, PROMPTS[3]) == "m-chat"
        assert target(b, PROMPTS[0]) == "m-math"          # b's own LRU now
        assert counts(a) == {"model": 1.0, "budget": 1.0, "local": 0.0, "store": 0.0, "errors": 0.0}
        assert counts(b) == {"model": 3.0, "budget": 1.0, "local": 1.0, "store": 1.0, "errors": 0.0}
        calls = sum(c["model"] - c["local"] - c["store"] for c in (counts(a), counts(b)))
        assert calls == 2.0                                # model calls across the fleet: the budget
        # a live config apply opens new router instances (a fresh in-process budget): bound again,
        # they still see the fleet's spent minute
        port = a.url.rsplit(":", 1)[1]
        a.config_path.write_text(yaml.replace("{port}", port).replace(
            "  m-chat: { provider: oa }\n", "  m-chat: { provider: oa }\n  m-spare: { provider: oa }\n"))
        os.kill(a.proc.pid, signal.SIGHUP)
        wait_until(lambda: "version 2 now serving" in a.logs(), timeout=15, what="the config apply")
        assert target(a, PROMPTS[4]) == "m-chat"
        assert metric(a, "busbar_router_fallback_total", reason="budget") == 1.0   # the new instance's own
    finally:
        for node in (a, b):
            node.stop()


@pytest.mark.slow
def test_a_store_down_at_run_time_routes_from_the_process_and_counts_the_faults(
        tmp_path: Path, mock, router_dir: Path, store_config) -> None:
    module, settings = store_config("postgres")
    proxy = TcpProxy(5432).start()
    settings = {**settings, "url": settings["url"].replace(":5432/", f":{proxy.port}/")}
    node, = start_nodes(1, config(module, settings, mock.url, router_dir), tmp_path)
    try:
        early_in_a_minute()
        proxy.down()
        proxy.drop()
        assert [target(node, p) for p in PROMPTS[:3]] == ["m-math", "m-math", "m-chat"]   # the process's budget: 2
        assert target(node, PROMPTS[0]) == "m-math"                                       # its own LRU
        got = counts(node)
        assert (got["model"], got["budget"], got["local"], got["store"]) == (3.0, 1.0, 1.0, 0.0)
        assert got["errors"] == 1.0               # the first lookup failed; the store is left alone for 5 s
        assert metric(node, "busbar_router_store_errors_total", op="cache_get") == 1.0
        assert node.logs().count("the shared store failed (cache_get: SharedStateError: shared state: ") == 1
        proxy.up()
        time.sleep(5.5)
        # the store again: it is handed the 2 calls made meanwhile, so the fleet's minute is spent
        assert target(node, PROMPTS[3]) == "m-chat"
        got = counts(node)
        assert (got["model"], got["budget"], got["errors"]) == (3.0, 2.0, 1.0)
    finally:
        node.stop()
        proxy.stop()
