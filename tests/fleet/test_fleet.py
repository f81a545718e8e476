"""Three ``busbar`` processes on one store (PostgreSQL, Valkey/Redis, SQLite), traffic through every
node with the OpenAI SDK against the mock provider:

- the day's metering row converges on the exact fleet total (tokens the clients were told,
  requests), through a store restart mid-run (every store connection cut) with nothing lost or
  doubled; then a key revoked through the store (as the admin API does) is refused by every node
  within 1 s (each node's key mirror resyncs every 0.25 s);
- a store down at run time: requests keep flowing from memory, the flush failures show in
  ``/metrics``, and the backlog lands exactly once the store is back; a node stopped while the
  store is still down logs the rows it could not flush and counts them.

The store is cut off through a TCP relay (tests/fleet/tcpproxy.py) in front of the machine's real
server, so no other test's connections are touched.
"""
from __future__ import annotations

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from busbar.auth.signing import keyring_from_text
from busbar.auth.tokens import mint
from prometheus_client.parser import text_string_to_metric_families

from tests.fleet.conftest import ENV, fleet_yaml, read_store
from tests.fleet.tcpproxy import TcpProxy
from tests.support.gateway import BusbarProcess

MSG = [{"role": "user", "content": "fleet traffic"}]
PORTS = {"postgres": 5432, "valkey": 6379}
SEED = base64.b64encode(bytes(range(32))).decode()
AUTH = "auth: { chain: [keys], signing_key: { env: T_FLEET_SIGN } }\n"


def start_nodes(n: int, yaml: str, tmp_path: Path, env: dict[str, str] | None = None) -> list[BusbarProcess]:
    nodes = [BusbarProcess(yaml, tmp_path, env={**ENV, **(env or {})}) for _ in range(n)]
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(lambda node: node.start(timeout=90), nodes))
    return nodes


def traffic(nodes: list[BusbarProcess], per_node: int, token: str = "x") -> tuple[int, int]:
    """``per_node`` chat completions through each node, concurrently; the (prompt, completion) tokens
    the clients were told, summed."""
    def one(node: BusbarProcess) -> tuple[int, int]:
        client = openai.OpenAI(base_url=node.url + "/v1", api_key=token, max_retries=0, timeout=30)
        tin = tout = 0
        for _ in range(per_node):
            reply = client.chat.completions.create(model="gpt", messages=MSG)
            assert reply.usage is not None
            tin, tout = tin + reply.usage.prompt_tokens, tout + reply.usage.completion_tokens
        return tin, tout
    with ThreadPoolExecutor(len(nodes)) as pool:
        sums = list(pool.map(one, nodes))
    return sum(s[0] for s in sums), sum(s[1] for s in sums)


def metric(node: BusbarProcess, name: str, token: str = "", **labels: str) -> float:
    """A sample of ``/metrics`` (behind the front door: ``token`` when ``auth.chain`` is set)."""
    reply = httpx.get(node.url + "/metrics", headers={"authorization": f"Bearer {token}"} if token else {})
    assert reply.status_code == 200, reply.text
    text = reply.text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def converged(module: str, settings: dict[str, Any], day: str, expected: dict[str, Any],
              timeout: float = 10.0) -> list[dict[str, Any]]:
    """Poll the store until the day's metering equals ``[expected]``; the rows last read."""
    deadline = time.monotonic() + timeout
    while True:
        rows = read_store(module, settings, "metering", day)
        if rows == [expected] or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def row(day: str, tin: int, tout: int, requests: int, key_id: str = "-") -> dict[str, Any]:
    return {"day": day, "key_id": key_id, "model": "gpt", "provider": "oa", "input": tin, "output": tout,
            "cache_read": 0, "cache_write": 0, "requests": requests, "billable_requests": requests,
            "key_group_at_use": ""}


def status(url: str, token: str) -> int:
    client = openai.OpenAI(base_url=url + "/v1", api_key=token, max_retries=0, timeout=10)
    try:
        client.chat.completions.create(model="gpt", messages=MSG)
    except openai.APIStatusError as e:
        return e.status_code
    return 200


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres", "valkey", "sqlite"])
def test_three_nodes_converge_through_a_store_restart_and_refuse_a_revoked_key_within_a_second(
        backend: str, tmp_path: Path, mock, plugins_dir: Path, store_config) -> None:
    module, settings = store_config(backend)
    proxy = None
    if backend in PORTS:
        proxy = TcpProxy(PORTS[backend]).start()
        settings = {**settings, "url": settings["url"].replace(f":{PORTS[backend]}/", f":{proxy.port}/")}
    now = int(time.time())            # a key written to the store the way the admin API mints one
    read_store(module, settings, "put_key", json.dumps({"id": "vk_fleet1", "name": "fleet", "created_at": now,
                                                        "expires_at": now + 3600}))
    token = mint(keyring_from_text(SEED, "test"), "vk_fleet1", now + 3600, 0)
    nodes = start_nodes(3, fleet_yaml(module, settings, mock.url, plugins_dir, extra=AUTH), tmp_path,
                        env={"T_FLEET_SIGN": SEED})
    day = datetime.now(UTC).date().isoformat()
    try:
        in1, out1 = traffic(nodes, 4, token)
        first = row(day, in1, out1, 12, "vk_fleet1")
        assert converged(module, settings, day, first) == [first]
        if proxy is not None:
            assert proxy.drop() >= 3            # every node's store connections cut: a restart, as seen by them
        in2, out2 = traffic(nodes, 4, token)
        expected = row(day, in1 + in2, out1 + out2, 24, "vk_fleet1")
        assert converged(module, settings, day, expected) == [expected]
        assert [metric(n, "busbar_store_flush_lost_total", token, kind="metering") for n in nodes] == [0.0] * 3

        read_store(module, settings, "deny", "vk_fleet1", str(int(time.time())))    # revoked through the store
        denied_at = time.monotonic()
        refused: dict[int, float] = {}
        while len(refused) < 3 and time.monotonic() - denied_at < 5:
            for i, node in enumerate(nodes):
                if i not in refused and status(node.url, token) == 401:
                    refused[i] = time.monotonic() - denied_at
        assert sorted(refused) == [0, 1, 2]
        assert max(refused.values()) < 1.0, refused
    finally:
        for node in nodes:
            node.stop()
        if proxy is not None:
            proxy.stop()


@pytest.mark.slow
def test_a_store_down_at_run_time_keeps_requests_flowing_and_counts_what_it_loses(
        tmp_path: Path, mock, plugins_dir: Path, store_config) -> None:
    module, settings = store_config("postgres")
    proxy = TcpProxy(PORTS["postgres"]).start()
    settings = {**settings, "url": settings["url"].replace(":5432/", f":{proxy.port}/")}
    node, = start_nodes(1, fleet_yaml(module, settings, mock.url, plugins_dir), tmp_path)
    day = datetime.now(UTC).date().isoformat()
    try:
        proxy.down()
        tin, tout = traffic([node], 5)                                   # all answered from memory
        time.sleep(0.3)
        assert metric(node, "busbar_store_flush_failures_total") >= 1
        assert metric(node, "busbar_store_flush_pending_rows") == 1.0      # one metering row, held
        proxy.up()
        expected = row(day, tin, tout, 5)
        assert converged(module, settings, day, expected) == [expected]   # the backlog lands, once
        assert metric(node, "busbar_store_flush_lost_total", kind="metering") == 0.0

        proxy.down()
        traffic([node], 2)
        node.stop()                              # the final flush fails: the row is dropped, counted and logged
        assert node.proc is not None and node.proc.returncode == 0
        assert ("store (postgres): dropped 1 pending metering row(s); the store copy of the ledger is short by them"
                in node.logs())
        proxy.up()
        assert read_store(module, settings, "metering", day) == [expected]
    finally:
        node.stop()
        proxy.stop()
