"""Issue 11 item 1 through a real busbar: a provider's ``allow_metadata_hosts`` is an exception for
that provider only, enforced at connect time.

``security.blocked_metadata_hosts: ["127.0.0.1"]`` makes the loopback upstream a metadata address for
this test. Provider ``a`` allow-lists it; provider ``b`` has no allow-list and its host, ``localhost``,
resolves to that same address (the system resolver, no test seam). ``b`` is refused when it connects
(the attempt fails over, as any connect-time refusal does); ``a`` connects.
"""
from __future__ import annotations

import httpx

from tests.e2e.test_upstream_faults import OK  # a canned OpenAI chat completion, "fine"
from tests.support.gateway import BusbarProcess
from tests.support.rawhttp import Upstream

CONFIG = """
listen: "127.0.0.1:{port}"
security:
  blocked_metadata_hosts: ["127.0.0.1"]
providers:
  a: { protocol: openai, base_url: "http://127.0.0.1:UPPORT/v1", api_key: { env: T_KEY },
       allow_metadata_hosts: ["127.0.0.1"] }
  b: { protocol: openai, base_url: "http://localhost:UPPORT/v1", api_key: { env: T_KEY } }
models:
  m-a: { provider: a }
  m-b: { provider: b }
pools:
  p: { members: [ { model: m-b, weight: 1000 }, { model: m-a, weight: 1 } ] }
  only-b: { members: [ { model: m-b } ] }
  only-a: { members: [ { model: m-a } ] }
"""
HI = {"messages": [{"role": "user", "content": "hi"}]}


async def test_an_allow_list_is_the_declaring_providers_only_at_connect_time(tmp_path):
    async with Upstream(response=OK) as up:
        gw = BusbarProcess(CONFIG.replace("UPPORT", str(up.port)), tmp_path, env={"T_KEY": "k"}).start()
        try:
            async with httpx.AsyncClient(base_url=gw.url, timeout=10) as c:
                failover = await c.post("/v1/chat/completions", json={"model": "p", **HI})
                refused = await c.post("/v1/chat/completions", json={"model": "only-b", **HI})
                direct = await c.post("/v1/chat/completions", json={"model": "only-a", **HI})
        finally:
            gw.stop()
        logs = gw.logs()
    assert (failover.status_code, failover.headers["x-busbar-route-target"]) == (200, "m-a")
    assert failover.json()["choices"][0]["message"]["content"] == "fine"
    assert (direct.status_code, direct.headers["x-busbar-route-target"]) == (200, "m-a")
    assert refused.status_code == 503
    # the client never sees the internal address; the operator's log names the refusal
    assert refused.json()["error"]["message"] == ("all upstream attempts failed; last: upstream connection "
                                                  "failure at lane 'm-b'")
    assert ("provider: localhost resolved to 127.0.0.1, a cloud-metadata address; refused at connect time by "
            "the SSRF guard") in logs
    assert up.requests == 2                     # b never reached the upstream
