"""Upstream faults and client disconnects through a real busbar, against a raw HTTP/1.1 upstream
(tests/support/rawhttp.py) that misbehaves on purpose.

- Case C026: a client that goes away closes the upstream connection at once, whatever phase the
  attempt is in (waiting for the first stream event, reading a JSON body), and the lane's
  ``max_concurrent`` permit comes back.
"""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.support.gateway import BusbarProcess
from tests.support.rawhttp import Upstream

OK_JSON = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"},
                                   "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(OK_JSON), OK_JSON)

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  raw: { protocol: openai, base_url: "http://127.0.0.1:UPPORT/v1", api_key: { env: T_KEY } }
models:
  m1: { provider: raw, max_concurrent: 1 }
pools:
  p: { members: [ { model: m1 } ] }
"""


async def _post(port: int, body: dict) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    raw = json.dumps(body).encode()
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: busbar\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n%s" % (len(raw), raw))
    await writer.drain()
    return reader, writer


async def _until(cond, timeout_s: float) -> bool:
    for _ in range(int(timeout_s / 0.02)):
        if cond():
            return True
        await asyncio.sleep(0.02)
    return cond()


@pytest.mark.parametrize("stream", [True, False])
async def test_client_gone_before_the_first_event_closes_the_upstream_connection(tmp_path, stream):
    """The upstream answered 200 and started its body, the gateway is still waiting for the first
    decodable event (stream) or the rest of the JSON body, and the client disconnects: the upstream
    connection is closed at once (well within 2 s) and the permit is released (the next request is served)."""
    async def stall_then_ok(writer: asyncio.StreamWriter) -> None:
        if up.requests > 1:
            writer.write(OK)
        elif stream:       # headers and an SSE comment: no event yet, the attempt has not committed
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
                         b"\r\n\r\ne\r\n: keep-alive\n\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n"
                         b'{"id":')

    async with Upstream(responder=stall_then_ok) as up:
        gw = BusbarProcess(CONFIG.replace("UPPORT", str(up.port)), tmp_path, env={"T_KEY": "k"}).start()
        try:
            _r, w = await _post(gw.port, {"model": "p", "stream": stream,
                                          "messages": [{"role": "user", "content": "hi"}]})
            assert await _until(lambda: up.requests == 1, 5)
            await asyncio.sleep(0.3)             # the gateway has read the partial body by now
            w.close()
            assert await _until(lambda: up.closed == 1, 2), "upstream connection left open"
            r, w2 = await _post(gw.port, {"model": "p", "messages": [{"role": "user", "content": "again"}]})
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5)
            w2.close()
            assert head.startswith(b"HTTP/1.1 200 ")
            assert b"x-busbar-route-target: m1\r\n" in head
        finally:
            gw.stop()


def _with_headers(extra: list[tuple[str, str]]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in extra)
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + head.encode() +
            b"content-length: %d\r\n\r\n%s" % (len(OK_JSON), OK_JSON))


@pytest.mark.parametrize("extra", [
    [("content-security-policy", "default-src " + "https://cdn.example " * 500)],   # one 10 KB header
    [(f"x-edge-{i}", "v" * 40) for i in range(200)],                               # 200 headers, 10 KB
], ids=["one-10k-header", "200-headers"])
async def test_a_large_but_valid_response_head_is_served(tmp_path, extra):
    """A 2xx whose head is large but within what the httpx client accepted (16 KiB) is relayed,
    not failed over: aiohttp's defaults (8190-byte header line, 128 headers) are raised."""
    async with Upstream(response=_with_headers(extra)) as up:
        gw = BusbarProcess(CONFIG.replace("UPPORT", str(up.port)), tmp_path, env={"T_KEY": "k"}).start()
        try:
            async with httpx.AsyncClient(base_url=gw.url, timeout=10) as c:
                r = await c.post("/v1/chat/completions",
                                 json={"model": "p", "messages": [{"role": "user", "content": "hi"}]})
        finally:
            gw.stop()
    assert r.status_code == 200, r.text
    assert r.headers["x-busbar-route-target"] == "m1"
    assert r.json()["choices"][0]["message"]["content"] == "fine"
    assert up.requests == 1


TWO = """
listen: "127.0.0.1:{port}"
providers:
  bad: { protocol: openai, base_url: "http://127.0.0.1:BADPORT/v1", api_key: { env: T_KEY } }
  good: { protocol: openai, base_url: "http://127.0.0.1:GOODPORT/v1", api_key: { env: T_KEY } }
models:
  m-bad: { provider: bad }
  m-good: { provider: good }
pools:
  p: { members: [ { model: m-bad, weight: 1000 }, { model: m-good, weight: 1 } ],
       breaker: { trip: { mode: consecutive, consecutive_n: 100 } } }
  only-bad: { members: [ { model: m-bad } ], breaker: { trip: { mode: consecutive, consecutive_n: 100 } } }
"""


@pytest.mark.parametrize("response, reason", [
    (b"GARBAGE NONSENSE\r\n\r\n", "Bad status line"),
    (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nZZZ\r\n",
     "Invalid character in chunk size"),
], ids=["status-line", "chunk-size"])
async def test_a_malformed_response_fails_over_and_the_reason_is_one_clean_line(tmp_path, response, reason):
    """Before the first byte a malformed upstream answer fails over (docs/configuration.md); when it is the last
    failure the 503 names the lane in one line (no exception class, no upstream address: the reason
    goes to the gateway log)."""
    async with Upstream(response=response) as bad, Upstream(response=OK) as good:
        text = TWO.replace("BADPORT", str(bad.port)).replace("GOODPORT", str(good.port))
        gw = BusbarProcess(text, tmp_path, env={"T_KEY": "k"}).start()
        try:
            async with httpx.AsyncClient(base_url=gw.url, timeout=10) as c:
                served = await c.post("/v1/chat/completions",
                                      json={"model": "p", "messages": [{"role": "user", "content": "hi"}]})
                failed = await c.post("/v1/chat/completions",
                                      json={"model": "only-bad", "messages": [{"role": "user", "content": "hi"}]})
        finally:
            gw.stop()
    assert (served.status_code, served.headers["x-busbar-route-target"]) == (200, "m-good")
    assert failed.status_code == 503
    assert failed.json() == {"error": {"message": "all upstream attempts failed; last: upstream connection "
                                                  "failure at lane 'm-bad'",
                                       "type": "server_error", "param": None, "code": None}}
    assert f"lane m-bad: upstream connection failed: ClientResponseError: {reason}" in gw.logs()


async def test_a_token_endpoint_refused_by_the_ssrf_guard_fails_over(tmp_path):
    """Case C032: a jwt-bearer service-account file whose token_uri is a metadata address (the file
    is a secret, so config load never sees the URL) is refused by the guard at request time; the
    attempt is an auth failure and the walk fails over, never a 500."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    sa = tmp_path / "sa.json"
    sa.write_text(json.dumps({"type": "service_account", "client_email": "svc@p.iam.gserviceaccount.com",
                              "private_key": pem, "token_uri": "http://169.254.169.254/token"}))
    config = f"""
listen: "127.0.0.1:{{port}}"
providers:
  sa: {{ protocol: openai, base_url: "http://127.0.0.1:GOODPORT/v1", auth: jwt-bearer, api_key: {{ file: {sa} }} }}
  good: {{ protocol: openai, base_url: "http://127.0.0.1:GOODPORT/v1", api_key: {{ env: T_KEY }} }}
models:
  m-sa: {{ provider: sa }}
  m-sa2: {{ provider: sa }}
  m-good: {{ provider: good }}
pools:
  p: {{ members: [ {{ model: m-sa2, weight: 1000 }}, {{ model: m-good, weight: 1 }} ] }}
  only-sa: {{ members: [ {{ model: m-sa }} ] }}
"""
    async with Upstream(response=OK) as good:
        gw = BusbarProcess(config.replace("GOODPORT", str(good.port)), tmp_path, env={"T_KEY": "k"}).start()
        try:
            async with httpx.AsyncClient(base_url=gw.url, timeout=10) as c:
                served = await c.post("/v1/chat/completions",
                                      json={"model": "p", "messages": [{"role": "user", "content": "hi"}]})
                failed = await c.post("/v1/chat/completions",
                                      json={"model": "only-sa", "messages": [{"role": "user", "content": "hi"}]})
        finally:
            gw.stop()
    assert (served.status_code, served.headers["x-busbar-route-target"]) == (200, "m-good")
    assert failed.status_code == 503
    assert failed.json()["error"]["message"] == ("all upstream attempts failed; last: upstream auth failure "
                                                 "at lane 'm-sa'")
    assert good.requests == 1
    assert "provider sa: token endpoint refused by the SSRF guard: provider: 169.254.169.254 is a " \
           "cloud-metadata endpoint" in gw.logs()


VERTEX = """
listen: "127.0.0.1:{port}"
providers:
  vtx: { protocol: anthropic, base_url: "http://127.0.0.1:UPPORT",
         path_base: /v1/projects/p/locations/l/publishers/anthropic/models, api_key: { env: T_KEY } }
models:
  claude: { provider: vtx, upstream_model: claude-3-5-sonnet-v2@20241022 }
"""


@pytest.mark.parametrize("path, model_on_wire", [
    ("/vtx/claude-3-5-sonnet-v2@20241022/v1/messages", "claude-3-5-sonnet-v2@20241022"),
    ("/vtx/claude%20x/v1/messages", "claude%20x"),
    ("/vtx/claude-x%3AcountTokens%3Fa%3Db%23/v1/messages", "claude-x%3AcountTokens%3Fa%3Db%23"),
    ("/vtx/x/google/models/gemini-pro/v1/messages", "x%2Fgoogle%2Fmodels%2Fgemini-pro"),
], ids=["vertex-id", "space", "verb-query-fragment", "slashes"])
async def test_the_ad_hoc_model_stays_one_segment_under_path_base(tmp_path, path, model_on_wire):
    """Claude-on-Vertex: the ad-hoc route's model is the client's text; it is percent-encoded as one
    path segment before ':rawPredict' (as Gemini and Bedrock encode theirs), so the request line is
    valid HTTP and no client can leave path_base, drop the verb or add a query on the operator's
    credential. The aiohttp client sends the URL as built (yarl encoded=True). A name with a '.' or
    '..' segment never gets this far: it is a 400 before any upstream work
    (tests/e2e/test_model_names.py)."""
    async with Upstream(response=OK) as up:
        gw = BusbarProcess(VERTEX.replace("UPPORT", str(up.port)), tmp_path, env={"T_KEY": "k"}).start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
            raw = b'{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}'
            writer.write(b"POST %s HTTP/1.1\r\nhost: busbar\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (path.encode(), len(raw), raw))
            await writer.drain()
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            writer.close()
        finally:
            gw.stop()
    assert up.heads[-1].split(b"\r\n", 1)[0].decode() == (
        f"POST /v1/projects/p/locations/l/publishers/anthropic/models/{model_on_wire}:rawPredict HTTP/1.1")
