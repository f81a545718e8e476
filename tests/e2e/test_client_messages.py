"""Client-facing error text names the field and the fix, never an exception class or an internal
address: deep JSON nesting and a dead upstream, through a real busbar (issue 11 item 14)."""
from __future__ import annotations

import httpx
import pytest

from tests.support.gateway import free_port

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
  up-gemini: { protocol: gemini, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  dead: { protocol: openai, base_url: "http://127.0.0.1:DEADPORT/v1", api_key: { env: T_OPENAI_KEY } }
models:
  oa: { provider: up-openai, upstream_model: gpt-wire }
  an: { provider: up-anthropic }
  gone: { provider: dead }
  gm: { provider: up-gemini }
pools:
  same: { members: [ { model: oa } ] }
  cross: { members: [ { model: an } ] }
  deadpool: { members: [ { model: gone } ] }
  gem: { members: [ { model: gm } ] }
"""
DEAD_PORT = free_port()


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG.replace("DEADPORT", str(DEAD_PORT)), mock.url)


def _nest(n: int) -> str:
    return "[" * n + "]" * n


def _chat(gw, pool: str, extra: str) -> httpx.Response:
    body = '{"model":"' + pool + '","messages":[{"role":"user","content":"hi"}]' + extra + "}"
    return httpx.post(gw.url + "/v1/chat/completions", content=body.encode(),
                      headers={"content-type": "application/json"})


@pytest.mark.parametrize("pool", ["same", "cross"])
@pytest.mark.parametrize("depth", [128, 255, 300, 1023])
def test_deep_nesting_is_a_400_naming_the_field(gw, pool, depth):
    """The body is 1 level, ``metadata`` adds its own: 127 levels inside it is the deepest allowed."""
    r = _chat(gw, pool, ',"metadata":' + _nest(depth))
    assert r.status_code == 400
    assert r.json() == {"error": {
        "message": "'metadata' nests JSON arrays/objects more than 128 levels deep (the limit); flatten it",
        "type": "invalid_request_error", "param": None, "code": None}}


@pytest.mark.parametrize("pool", ["same", "cross"])
def test_nesting_at_the_limit_is_served(gw, pool):
    r = _chat(gw, pool, ',"user":"u","metadata":{"k":' + _nest(126) + '}')
    assert r.status_code == 200, r.text


def test_deep_nesting_inside_messages_names_the_path(gw):
    body = '{"model":"same","messages":[{"role":"user","content":' + _nest(200) + "}]}"
    r = httpx.post(gw.url + "/v1/chat/completions", content=body.encode())
    assert r.json()["error"]["message"] == ("'messages[0].content' nests JSON arrays/objects more than 128 "
                                            "levels deep (the limit); flatten it")


def test_nesting_past_the_parser_limit_names_the_body(gw):
    r = _chat(gw, "same", ',"metadata":' + _nest(1100))
    assert r.status_code == 400
    assert r.json()["error"]["message"] == ("the request body nests JSON arrays/objects more than 128 levels "
                                            "deep (the limit); flatten it")


def test_deep_nesting_in_every_protocols_envelope(gw):
    deep = _nest(200)
    r = httpx.post(gw.url + "/v1/messages", content=('{"model":"same","max_tokens":5,"messages":[],"metadata":'
                                                      + deep + '}').encode())
    assert r.status_code == 400 and r.json() == {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "'metadata' nests JSON arrays/objects more than 128 levels deep (the limit); flatten it"}}
    r = httpx.post(gw.url + "/v1beta/models/same:generateContent",
                   content=('{"contents":[],"x":' + deep + '}').encode())
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert r.json()["error"]["message"].startswith("'x' nests JSON arrays/objects more than 128 levels")
    r = httpx.post(gw.url + "/model/same/converse", content=('{"messages":[],"x":' + deep + '}').encode())
    assert r.status_code == 400 and r.headers["x-amzn-errortype"].startswith("ValidationException:")
    assert r.json()["message"].startswith("'x' nests JSON arrays/objects more than 128 levels")


@pytest.mark.parametrize("body", [
    {"model": "cross", "stop": 5, "messages": [{"role": "user", "content": "x"}]},
    {"model": "cross", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{}]},
], ids=["stop-int", "tool-empty"])
def test_wrong_shape_message_has_no_exception_class(gw, body):
    r = httpx.post(gw.url + "/v1/chat/completions", json=body)
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert "Error" not in message and "Exception" not in message


def test_reader_crash_is_a_400_not_a_500(gw):
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": "cross", "stop": 5,
                                                          "messages": [{"role": "user", "content": "x"}]})
    assert r.json() == {"error": {
        "message": "malformed request body: a field has the wrong type or shape; check the body against the "
                   "openai request format", "type": "invalid_request_error", "param": None, "code": None}}


def test_dead_upstream_503_names_the_lane_not_the_address(gw):
    r = _chat(gw, "deadpool", "")
    assert r.status_code == 503
    assert r.json() == {"error": {
        "message": "all upstream attempts failed; last: upstream connection failure at lane 'gone'",
        "type": "server_error", "param": None, "code": None}}
    assert f"127.0.0.1:{DEAD_PORT}" not in r.text
    assert f"127.0.0.1:{DEAD_PORT}" in gw.logs()           # the operator still gets the reason


def test_gemini_json_array_stream_checks_the_body_before_the_upstream_call(gw, mock):
    """Found by the ingress fuzz: the JSON-array stream re-frames the reply, so it needs the body's IR;
    a malformed body was a 500 after the upstream call, it is now a 400 before it."""
    r = httpx.post(gw.url + "/v1beta/models/gem:streamGenerateContent", json={"contents": [{}]})
    assert (r.status_code, r.json()) == (400, {"error": {
        "code": 400, "message": "contents[0].parts: must be a list of parts", "status": "INVALID_ARGUMENT"}})
    assert mock.requests() == []
