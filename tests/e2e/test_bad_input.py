"""Bad input answers in the caller's own protocol envelope, and client disconnects cancel upstream."""
from __future__ import annotations

import socket
import time

import anthropic
import httpx
import openai
import pytest

from tests.support.waiting import wait_until

CONFIG = """
listen: "127.0.0.1:{port}"
limits: { request_body_max_bytes: 2048 }
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  slow-oa: { provider: up-openai, max_concurrent: 1 }
  slow-an: { provider: up-anthropic, max_concurrent: 1 }
pools:
  p: { members: [ { model: slow-oa } ] }
"""


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


def test_malformed_json_openai(gw):
    r = httpx.post(gw.url + "/v1/chat/completions", content=b"{not json",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] is None and err["code"] is None
    assert err["message"].startswith("request body is not valid JSON")


def test_malformed_json_anthropic(gw):
    r = httpx.post(gw.url + "/v1/messages", content=b"[1,", headers={"content-type": "application/json"})
    assert r.status_code == 400
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"


def test_unknown_pool_404_sdk_types(gw):
    with pytest.raises(openai.NotFoundError) as e1:
        openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "x"}])
    assert e1.value.body["message"] == ("the model 'nope' does not exist: no pool or model of that "
                                        "name is configured")
    with pytest.raises(anthropic.NotFoundError) as e2:
        anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0).messages.create(
            model="nope", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert e2.value.body["error"]["type"] == "not_found_error"


def test_body_over_limit_413(gw):
    big = "x" * 3000
    with pytest.raises(openai.APIStatusError) as e1:
        openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            model="p", messages=[{"role": "user", "content": big}])
    assert e1.value.status_code == 413
    assert "exceeds the 2048-byte limit" in e1.value.body["message"]
    with pytest.raises(anthropic.APIStatusError) as e2:
        anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0).messages.create(
            model="p", max_tokens=5, messages=[{"role": "user", "content": big}])
    assert e2.value.status_code == 413
    assert e2.value.body["error"]["type"] == "request_too_large"


def test_unknown_route_native_404(gw):
    r = httpx.post(gw.url + "/v1/nothing-here", json={})
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "not_found_error"


def _raw_post(url: str, path: str, body: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


@pytest.mark.parametrize("stream", [False, True])
def test_client_disconnect_cancels_upstream(gw, mock, stream):
    """Case C026: the mock sees its connection closed within 1.5 s of the client closing, and the
    lane's single permit (max_concurrent: 1) is free again at once."""
    rule = {"status": 200, "delay_ms": 20000} if not stream else \
        {"status": 200, "chunk_delay_ms": 20000}
    mock.script([{"match": {"model": "slow-oa"}, "times": 1, "response": rule}])
    body = (b'{"model":"p","stream":%s,"messages":[{"role":"user","content":"slow"}]}'
            % (b"true" if stream else b"false"))
    s = _raw_post(gw.url, "/v1/chat/completions", body)
    if stream:
        s.settimeout(5)
        assert b"200 OK" in s.recv(65536)         # headers and the first chunk arrived
    else:
        time.sleep(0.5)
    closed_at = time.time()
    s.close()
    deadline = closed_at + 1.5
    events = []
    while time.time() < deadline:
        events = [e for e in mock.events() if e["type"] == "client_disconnected"]
        if events:
            break
        time.sleep(0.05)
    assert events, "upstream connection was not closed after the client disconnected"
    assert time.time() - closed_at < 1.5
    ok = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
        model="p", messages=[{"role": "user", "content": "after"}])
    assert ok.choices[0].finish_reason == "stop"     # the permit was released


def test_model_of_wrong_type(gw):
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": 123, "messages": []})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "'model' must be a string naming a pool or a model, not int"


def test_wrong_field_types_are_400_not_500(gw):
    """A field of the wrong type on a cross-protocol hop is the client's fault: 400 in its envelope."""
    r = httpx.post(gw.url + "/v1/messages", json={"model": "p", "max_tokens": 10, "stop_sequences": 5,
                                                  "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 400
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"


def test_wrong_method_and_unknown_methods(gw):
    r = httpx.get(gw.url + "/v1/chat/completions")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.request("DELETE", gw.url + "/v1/messages")
    assert r.status_code == 405 and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.request("OPTIONS", gw.url + "/anything")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"


def test_slow_body_is_cut_with_408(gateway_factory, mock):
    gw = gateway_factory(CONFIG.replace("limits: { request_body_max_bytes: 2048 }",
                                        "limits: { request_body_max_bytes: 2048, request_body_read_timeout_secs: 1 }"),
                         mock.url)
    host, port = gw.url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"content-length: 100\r\n\r\n{")
    s.settimeout(5)
    t0 = time.time()
    head = s.recv(65536)
    elapsed = time.time() - t0
    while b"limits.request_body_read_timeout_secs" not in head:   # the body may arrive in a 2nd segment
        more = s.recv(65536)
        if not more:
            break
        head += more
    s.close()
    assert head.startswith(b"HTTP/1.1 408")
    assert b"limits.request_body_read_timeout_secs" in head
    assert 0.9 <= elapsed < 3


def test_inbound_concurrency_cap_sheds_with_503(gateway_factory, mock):
    import threading
    gw = gateway_factory(CONFIG.replace("limits: { request_body_max_bytes: 2048 }",
                                        "limits: { max_inbound_concurrent: 1 }"), mock.url)
    mock.script([{"match": {"model": "slow-oa"}, "times": 1, "response": {"delay_ms": 1500}}])
    t = threading.Thread(target=lambda: httpx.post(gw.url + "/v1/chat/completions", timeout=10, json={
        "model": "p", "messages": [{"role": "user", "content": "slow"}]}))
    t.start()
    wait_until(lambda: any(r["body"].get("model") == "slow-oa" for r in mock.requests()),
               what="the slow request to hold the only inbound slot")
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": "p", "messages": [{"role": "user", "content": "x"}]})
    t.join()
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert "inbound concurrency limit (1, limits.max_inbound_concurrent)" in r.json()["error"]["message"]
