"""Strict limits across a fleet (docs/limits.md#strict-mode): three real ``busbar`` processes on one
PostgreSQL store, again on one Valkey/Redis store and on one SQLite file, 64 simultaneous requests spread over the three
nodes through the official OpenAI SDK, against one strict limit: the fleet admits exactly the cap.

Two keys, written to the store the way the admin API mints them, are bound to two groups: ``r``
(``requests: 10, per: hour, strict: true``) and ``b`` (``budget: 30000, per: month, strict: true``:
seven worst cases of ~4 025 µ each; the replies cost 1 500 µ each). The mock holds every reply 3 s,
so all 64 are in flight together: exactly 10 (and 7) are admitted, the others get the limit's own 429
without reaching the provider, and once settled the store's strict counter holds exactly what was
admitted, nothing reserved, and the metering ledger agrees. Then, with a network store cut off (a TCP relay in front of it), a strict
request is refused 503 naming the group, and served again once the store is back.
"""
from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest
from busbar.auth.signing import keyring_from_text
from busbar.auth.tokens import mint
from busbar_sdk.store.windows import window_start

from tests.fleet.conftest import fleet_yaml, plugins_dir, read_store, store_config  # noqa: F401 - fixtures
from tests.fleet.tcpproxy import TcpProxy
from tests.fleet.test_fleet import AUTH, PORTS, SEED, start_nodes
from tests.limits.test_limits_e2e import PROMPT, _openai_body, _together
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GROUPS = AUTH + """rate_card:
  gpt: { input_utok: 1.0, output_utok: 3.0 }
groups:
  r: { limits: [ { requests: 10, per: hour, strict: true } ] }
  b: { limits: [ { budget: 30000, per: month, strict: true } ] }
"""


def _keys(module: str, settings: dict) -> dict[str, str]:
    """A key bound to each group, written to the store; group -> token."""
    now = int(time.time())
    ring = keyring_from_text(SEED, "test")
    tokens = {}
    for group in ("r", "b"):
        read_store(module, settings, "put_key", json.dumps({"id": f"vk_{group}", "name": group, "created_at": now,
                                                            "expires_at": now + 3600, "group": group}))
        tokens[group] = mint(ring, f"vk_{group}", now + 3600, 0)
    return tokens


def _burst(nodes: list, token: str) -> list:  # noqa: ANN001
    clients = itertools.cycle([openai.OpenAI(base_url=n.url + "/v1", api_key=token, max_retries=0, timeout=30)
                               for n in nodes])
    picks = iter([next(clients) for _ in range(64)])
    return _together(64, lambda: next(picks).chat.completions.create(
        model="gpt", max_tokens=1000, messages=[{"role": "user", "content": PROMPT}]))


def _counter(module: str, settings: dict, bucket: str, start: int, metric: str, want: dict) -> dict:
    got: dict = {}

    def settled() -> bool:
        got.update(read_store(module, settings, "strict_get", bucket, str(start), metric))
        return got == want
    wait_until(settled, what=f"the strict counter {bucket} settled", timeout=10, interval=0.2)
    return got


@pytest.mark.parametrize("backend", ["postgres", "valkey", "sqlite"])
def test_three_nodes_admit_exactly_the_strict_cap(backend: str, tmp_path: Path, mock, plugins_dir: Path,  # noqa: F811
                                                  store_config) -> None:  # noqa: ANN001, F811
    module, settings = store_config(backend)
    proxy = TcpProxy(PORTS[backend]).start() if backend in PORTS else None     # sqlite: one file, no network
    if proxy is not None:
        settings = {**settings, "url": settings["url"].replace(f":{PORTS[backend]}/", f":{proxy.port}/")}
    tokens = _keys(module, settings)
    nodes = start_nodes(3, fleet_yaml(module, settings, mock.url, plugins_dir, extra=GROUPS), tmp_path,
                        env={"T_FLEET_SIGN": SEED})
    now = int(time.time())
    try:
        for group, cap, message, code in (
                ("r", 10, "group 'r': requests per hour exceeded (limit 10)", "rate_limit_exceeded"),
                ("b", 7, "group 'b': budget per month is exhausted (budget 30000)", "insufficient_quota")):
            mock.clear()
            mock.script([{"match": {"protocol": "openai"}, "times": 64,
                          "response": {"body": _openai_body(900, 200), "delay_ms": 3000}}])
            outcomes = _burst(nodes, tokens[group])
            refused = [o for o in outcomes if isinstance(o, openai.RateLimitError)]
            assert sum(isinstance(o, openai.types.chat.ChatCompletion) for o in outcomes) == cap, outcomes
            assert len(refused) == 64 - cap
            assert {e.body["message"] for e in refused} == {message}
            assert {e.body["code"] for e in refused} == {code}
            assert len(mock.requests()) == cap                   # the refused never reached the provider
        hour, month = window_start("hour", now), window_start("month", now)
        assert _counter(module, settings, "group:r@hour", hour, "requests", {"used": 10, "reserved": 0}) \
            == {"used": 10, "reserved": 0}
        assert _counter(module, settings, "group:b@month", month, "budget", {"used": 7 * 1500, "reserved": 0}) \
            == {"used": 10500, "reserved": 0}
        served = 7
        if proxy is not None:
            _outage(proxy, nodes[1], tokens["b"])
            served += 1
        for node in nodes:
            node.stop()                                          # each flushes its metering at shutdown
        day = datetime.now(UTC).date().isoformat()
        rows = read_store(module, settings, "metering", day)                  # the ledger agrees
        assert sorted((r["key_id"], r["billable_requests"]) for r in rows) == [("vk_b", served), ("vk_r", 10)]
    finally:
        for node in nodes:
            node.stop()
        if proxy is not None:
            proxy.stop()


def _outage(proxy: TcpProxy, node, token: str) -> None:  # noqa: ANN001
    """The store unreachable: a strict request is refused 503 naming the group (fail closed); served
    again once the store is back."""
    proxy.down()
    client = openai.OpenAI(base_url=node.url + "/v1", api_key=token, max_retries=0, timeout=30)
    with pytest.raises(openai.InternalServerError) as exc:
        client.chat.completions.create(model="gpt", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert exc.value.status_code == 503
    assert exc.value.body["message"] == ("group 'b': budget per month is strict and the store that enforces "
                                         "it is unavailable; the request is refused (retry shortly)")
    proxy.up()
    reply = client.chat.completions.create(model="gpt", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content
    assert "strict admission for group 'b' failed" in node.logs()


def test_an_absurd_worst_case_is_refused_429_not_a_store_failure(tmp_path: Path, mock, plugins_dir: Path,  # noqa: F811
                                                                 store_config) -> None:  # noqa: ANN001, F811
    """``max_tokens`` near 2^63 made a strict budget's reservation overflow the store's 64-bit counter:
    PostgreSQL refused the argument and every such request got a 503 "store unavailable" (logged and
    counted as a store failure). The charge is capped at the cap + 1: the limit's own 429."""
    module, settings = store_config("postgres")
    tokens = _keys(module, settings)
    node = start_nodes(1, fleet_yaml(module, settings, mock.url, plugins_dir, extra=GROUPS), tmp_path,
                       env={"T_FLEET_SIGN": SEED})[0]
    try:
        client = openai.OpenAI(base_url=node.url + "/v1", api_key=tokens["b"], max_retries=0, timeout=30)
        with pytest.raises(openai.RateLimitError) as exc:
            client.chat.completions.create(model="gpt", max_tokens=9_000_000_000_000_000_000,
                                           messages=[{"role": "user", "content": "hi"}])
        assert exc.value.status_code == 429
        assert exc.value.body["message"] == "group 'b': budget per month is exhausted (budget 30000)"
        assert mock.requests() == []
        month = window_start("month", int(time.time()))
        assert read_store(module, settings, "strict_get", "group:b@month", str(month), "budget") == \
            {"used": 0, "reserved": 0}
        assert "strict admission for group 'b' failed" not in node.logs()
    finally:
        node.stop()
