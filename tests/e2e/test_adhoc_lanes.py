"""Ad-hoc lanes live in a bounded cache and never become metric labels (docs/routing.md#ad-hoc-routes).

Thousands of distinct ad-hoc model names through the real busbar process: ``/metrics`` keeps exactly
the same series (an ad-hoc lane is counted under ``lane="<provider>/*"``), ``busbar_adhoc_lanes``
stops at the cache bound, an ad-hoc lane cooling down keeps its breaker cell through the flood
(eviction prefers idle healthy lanes) and an evicted healthy lane is built again and serves.
"""
from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from busbar.proxy.adhoc import ADHOC_LANE_CACHE_SIZE

CONFIG = """
listen: "127.0.0.1:{port}"
metrics: { buffer_seconds: 60 }
providers:
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  claude: { provider: up-anthropic }
"""
N_NAMES = 2 * ADHOC_LANE_CACHE_SIZE + 500       # well past the bound: 2,548 distinct names
BODY = json.dumps({"model": "x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode()
_VALUE = re.compile(r" [^ ]+$")


async def _post_all(port: int, paths: list[str], conns: int = 16) -> list[int]:
    """POST ``BODY`` to every path over ``conns`` keep-alive HTTP/1.1 connections; the statuses in order.

    A plain socket client: the test measures the gateway, not an HTTP library's per-request cost."""
    statuses = [0] * len(paths)
    queue = list(enumerate(paths))[::-1]

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while queue:
                i, path = queue.pop()
                writer.write(f"POST {path} HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\n"
                             f"content-length: {len(BODY)}\r\n\r\n".encode() + BODY)
                head = await reader.readuntil(b"\r\n\r\n")
                statuses[i] = int(head.split(b" ", 2)[1])
                length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
                await reader.readexactly(length)
        finally:
            writer.close()

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(conns))), timeout=240)
    return statuses


def _series(metrics_text: str) -> list[str]:
    """Every sample line without its value (the series identities)."""
    return sorted(_VALUE.sub("", line) for line in metrics_text.splitlines()
                  if line and not line.startswith("#"))


def _sample(metrics_text: str, series: str) -> float:
    for line in metrics_text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {series}")


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


@pytest.mark.slow
def test_distinct_adhoc_names_keep_metrics_and_lane_cache_bounded(gw, mock):
    ask = lambda model: httpx.post(f"{gw.url}/up-anthropic/{model}/v1/messages", content=BODY,  # noqa: E731
                                   headers={"content-type": "application/json"}, timeout=30)
    # 1. cool one ad-hoc lane down: the upstream answers 503 with Retry-After 600 (a cooldown floor)
    mock.script([{"match": {"model": "sick-lane"}, "times": -1,
                  "response": {"status": 503, "headers": {"retry-after": "600"},
                               "body": {"type": "error", "error": {"type": "overloaded_error",
                                                                   "message": "down"}}}}])
    first = ask("sick-lane")
    assert first.status_code == 503
    assert first.json()["error"]["message"] == "all upstream attempts failed; last: down"
    assert len(mock.requests()) == 1
    tripped = ask("sick-lane")
    assert tripped.status_code == 503 and int(tripped.headers["retry-after"]) >= 590
    assert tripped.json() == {"type": "error", "error": {
        "type": "overloaded_error", "message": "'sick-lane': no healthy upstream available; retry later"}}
    assert len(mock.requests()) == 1             # the cooling lane answered; no upstream call
    assert ask("early-lane").status_code == 200
    before = httpx.get(gw.url + "/metrics").text
    assert _sample(before, "busbar_adhoc_lanes") == 2
    mock.clear()

    # 2. flood: N_NAMES distinct ad-hoc model names, each a real upstream call
    paths = [f"/up-anthropic/name-{i}/v1/messages" for i in range(N_NAMES)]
    statuses = asyncio.run(_post_all(gw.port, paths))
    assert statuses == [200] * N_NAMES
    after = httpx.get(gw.url + "/metrics").text
    new = set(_series(after)) - set(_series(before))
    # labels never carry the names: at most the few series a first flush or failure adds, never one per name
    assert len(new) <= 4 and not any("name-" in series for series in new), sorted(new)
    assert "name-" not in after and "sick-lane" not in after and "early-lane" not in after
    samples = sum(1 for line in after.splitlines() if line and not line.startswith("#"))
    assert len(after) - len(before) <= 8 * samples     # only sample values grew (a few digits each)
    assert _sample(after, 'busbar_upstream_attempts_total{lane="up-anthropic/*",pool=""}') == 1 + 1 + N_NAMES
    assert _sample(after, "busbar_adhoc_lanes") == ADHOC_LANE_CACHE_SIZE
    mock.clear()

    # 3. the cooling lane kept its breaker cell: still refused without an upstream call
    again = ask("sick-lane")
    assert again.status_code == 503
    assert again.json()["error"]["message"] == "'sick-lane': no healthy upstream available; retry later"
    assert mock.requests() == []
    # 4. the early healthy lane (least recently used, so evicted) is built again and serves
    back = ask("early-lane")
    assert back.status_code == 200 and back.headers["x-busbar-route-target"] == "early-lane"
    assert [r["body"]["model"] for r in mock.requests()] == ["early-lane"]
    assert _sample(httpx.get(gw.url + "/metrics").text, "busbar_adhoc_lanes") == ADHOC_LANE_CACHE_SIZE
