"""Graceful shutdown through a real busbar (docs/operations.md#stopping): SIGTERM stops accepting, a
request that finishes within the drain is answered normally, and past the drain a stalled stream ends
with its protocol's in-band error and a stalled non-stream request gets a 503 in its own envelope;
the process then exits 0."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx

from tests.support.waiting import wait_until

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  sd-quick: { provider: up-openai }
  sd-stall: { provider: up-openai }
  sd-hang: { provider: up-openai }
"""


def test_sigterm_drains_then_ends_what_is_left_with_a_reply(gateway_factory, mock):
    gw = gateway_factory(CONFIG, mock.url, env={"BUSBAR_DRAIN_SECS": "1.5", "BUSBAR_LOG": "info"})
    mock.script([{"match": {"model": "sd-quick"}, "response": {"delay_ms": 600}},
                 {"match": {"model": "sd-stall"}, "response": {"stall_after": 2}},
                 {"match": {"model": "sd-hang"}, "response": {"hang": True}}])
    out: dict[str, httpx.Response | str] = {}

    def call(model: str, stream: bool) -> None:
        body = {"model": model, "messages": [{"role": "user", "content": "x"}], "stream": stream}
        with httpx.Client(timeout=20) as c:
            if stream:
                with c.stream("POST", gw.url + "/v1/chat/completions", json=body) as r:
                    out[model] = "".join(r.iter_text())
            else:
                out[model] = c.post(gw.url + "/v1/chat/completions", json=body)

    threads = [threading.Thread(target=call, args=a) for a in
               (("sd-quick", False), ("sd-stall", True), ("sd-hang", False))]
    for t in threads:
        t.start()
    wait_until(lambda: len(mock.requests()) == 3, what="three upstream requests")
    t0 = time.monotonic()
    os.kill(gw.proc.pid, signal.SIGTERM)
    wait_until(lambda: "draining 3 request(s) in flight for up to 1.5s" in gw.logs(), what="drain line")
    try:
        httpx.get(gw.url + "/healthz", timeout=2)
        refused = False
    except httpx.ConnectError:
        refused = True
    assert refused                                 # no longer accepting
    for t in threads:
        t.join(15)
    assert gw.proc.wait(10) == 0
    assert 1.4 < time.monotonic() - t0 < 6
    quick = out["sd-quick"]
    assert isinstance(quick, httpx.Response) and quick.status_code == 200
    hang = out["sd-hang"]
    assert isinstance(hang, httpx.Response) and hang.status_code == 503
    assert hang.headers["retry-after"] == "1"
    assert hang.json()["error"]["message"] == "busbar is shutting down; retry the request"
    stream = out["sd-stall"]
    assert isinstance(stream, str)
    events = [json.loads(ln[6:]) for ln in stream.splitlines() if ln.startswith("data: {")]
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-1]["error"]["message"] == "busbar is shutting down; retry the request"
    assert "[DONE]" not in stream
    assert "the 1.5s drain is over; ending 2 request(s) still in flight" in gw.logs()
