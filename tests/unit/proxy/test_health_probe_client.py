"""Health probes over the request path's client (busbar.proxy.health.probe_once on AiohttpUpstream):
real sockets; every failure is a disposition applied to the lane's cells, never an exception out of
the probe loop."""
from __future__ import annotations

import asyncio

from busbar.config.load import load_config_text
from busbar.proxy.gateway import Gateway
from busbar.proxy.health import probe_once
from busbar.proxy.upstream import AiohttpUpstream
from busbar.security.ssrf import HostGuard, SsrfPolicy

from tests.support.rawhttp import HOSTS, Hosts, Upstream

CONFIG = """
providers:
  up: {{ protocol: openai, base_url: "{base}", api_key: {{ env: K }} }}
models:
  m: {{ provider: up }}
pools:
  p: {{ members: [ {{ model: m }} ] }}
"""


def gateway(base: str) -> Gateway:
    gw = Gateway.build(load_config_text(CONFIG.format(base=base), {"K": "sk-x"}), {"K": "sk-x"})
    guard = HostGuard(SsrfPolicy(), purpose="provider", allow_private=True)
    gw.upstream = AiohttpUpstream(guard, total_timeout_s=30, max_idle_per_host=8, idle_timeout_s=30,
                                  resolver=Hosts(HOSTS))
    return gw


async def test_probe_ok_recovers_the_lane() -> None:
    ok = (b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}')
    async with Upstream(response=ok) as up:
        gw = gateway(f"http://127.0.0.1:{up.port}")
        lane = gw.lanes["m"]
        lane.hard_down_until = gw.clock() + 100
        assert await probe_once(gw, lane, 2) == "ok"
        assert lane.hard_down_until == 0.0
        await gw.aclose()
    assert b"authorization: Bearer sk-x" in up.heads[0]


async def test_probe_to_a_host_now_resolving_to_metadata_is_a_network_failure() -> None:
    gw = gateway("https://imds.attacker.example")
    lane = gw.lanes["m"]
    cell = gw.pools["p"].members[0].cell
    assert await probe_once(gw, lane, 2) == "network"
    assert cell.streak == 1                 # recorded as a transient failure of the lane
    await gw.aclose()


async def test_probe_of_a_silent_upstream_times_out() -> None:
    async def silent(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(2)

    async with Upstream(responder=silent) as up:
        gw = gateway(f"http://127.0.0.1:{up.port}")
        t0 = asyncio.get_running_loop().time()
        assert await probe_once(gw, gw.lanes["m"], 0.2) == "network"
        assert asyncio.get_running_loop().time() - t0 < 1
        await gw.aclose()
