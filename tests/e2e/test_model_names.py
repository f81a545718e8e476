"""Client-chosen model names through the real busbar process (docs/routing.md#client-chosen-model-names).

A model name from the request path (ad-hoc ``/{provider}/{model}/v1/messages``, Gemini
``/v1beta/models/{m}:…``, Bedrock ``/model/{id}/…``, ``/{name}/v1/messages``) is one path segment:
an empty, ``.`` or ``..`` segment or a control character is a 400 in the caller's envelope and the
mock provider's request journal shows no upstream call; any other name is percent-encoded as ONE
segment on every path-model protocol, and ``x-busbar-route-target`` carries it percent-encoded.
"""
from __future__ import annotations

import http.client
import json
from urllib.parse import quote

import anthropic
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-gemini: { protocol: gemini, base_url: MOCK, api_key: { env: T_GEMINI_KEY } }
  up-bedrock: { protocol: bedrock, base_url: MOCK, api_key: { env: T_AWS_CREDS } }
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
  up-vertex-claude:
    protocol: anthropic
    base_url: MOCK
    path_base: /v1/projects/p1/locations/us-east5/publishers/anthropic/models
    api_key: { env: T_ANTHROPIC_KEY }
models:
  claude: { provider: up-anthropic }
  gem: { provider: up-gemini }
  "odd%41name": { provider: up-gemini, upstream_model: gemini-2.0-flash }
  "nova/eu": { provider: up-bedrock, upstream_model: amazon.nova-pro-v1:0 }
"""
ENV = {"T_GEMINI_KEY": "gk-test", "T_AWS_CREDS": "AKIDTEST:SECRETTEST"}
BODY = {"model": "ignored", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
BEDROCK_BODY = {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}
SEGMENT = "a model name is one path segment (no '.', '..' or empty parts between '/')"
DOTS = f"the model name has a '..' path segment; {SEGMENT}"
DOT = f"the model name has a '.' path segment; {SEGMENT}"
EMPTY = f"the model name has an empty path segment; {SEGMENT}"


def ctrl(code: int) -> str:
    return f"the model name contains the control character U+{code:04X}; a model name is printable text"


def anthropic_400(message: str) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def gemini_400(message: str) -> dict:
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url, ENV)


def raw_post(gw, path: str, body: dict) -> tuple[int, dict[str, str], bytes]:
    """POST with the path exactly as given (an SDK would normalize ``..`` away before sending)."""
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json"})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


# (request path, body, expected reply JSON) for names refused before any upstream work
REFUSED = [
    ("/up-gemini/../../x/v1/messages", BODY, anthropic_400(DOTS)),
    ("/up-gemini/a%2F..%2F..%2Fx/v1/messages", BODY, anthropic_400(DOTS)),
    ("/up-gemini/./v1/messages", BODY, anthropic_400(DOT)),
    ("/up-gemini/a//b/v1/messages", BODY, anthropic_400(EMPTY)),
    ("/up-bedrock/..%2Fmodel%2Fx/v1/messages", BODY, anthropic_400(DOTS)),
    ("/up-vertex-claude/..%2F..%2Fgoogle/v1/messages", BODY, anthropic_400(DOTS)),
    ("/up-anthropic/evil%0D%0Ax-injected:%201/v1/messages", BODY, anthropic_400(ctrl(0x0D))),
    ("/up-gemini/a%09b/v1/messages", BODY, anthropic_400(ctrl(0x09))),
    ("/up-gemini/a%7Fb/v1/messages", BODY, anthropic_400(ctrl(0x7F))),
    ("/up-gemini/a%C2%85b/v1/messages", BODY, anthropic_400(ctrl(0x85))),
    ("/v1beta/models/..%2F..%2Fx:generateContent", GEMINI_BODY, gemini_400(DOTS)),
    ("/v1beta/models/gem%0A:generateContent", GEMINI_BODY, gemini_400(ctrl(0x0A))),
    ("/model/..%2F..%2Fx/converse", BEDROCK_BODY, {"message": DOTS}),
    ("/./v1/messages", BODY, anthropic_400(DOT)),
]


@pytest.mark.parametrize(("path", "body", "expected"), REFUSED, ids=[p for p, _, _ in REFUSED])
def test_refused_names_answer_400_with_no_upstream_call(gw, mock, path, body, expected):
    status, headers, raw = raw_post(gw, path, body)
    assert status == 400
    assert json.loads(raw) == expected
    assert "x-busbar-route-target" not in headers
    assert mock.requests() == []


def test_bedrock_refusal_names_its_exception_type(gw, mock):
    status, headers, _ = raw_post(gw, "/model/..%2F..%2Fx/converse", BEDROCK_BODY)
    assert status == 400
    assert headers["x-amzn-errortype"] == \
        "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"
    assert mock.requests() == []


# (ad-hoc provider, client model name, exact upstream raw path, exact x-busbar-route-target)
ACCEPTED = [
    ("up-gemini", "a b?c#d%e", "/v1beta/models/a%20b%3Fc%23d%25e:generateContent", "a%20b%3Fc%23d%25e"),
    ("up-gemini", "🚀模型", "/v1beta/models/%F0%9F%9A%80%E6%A8%A1%E5%9E%8B:generateContent",
     "%F0%9F%9A%80%E6%A8%A1%E5%9E%8B"),
    ("up-gemini", "gemini-2.0-flash@001", "/v1beta/models/gemini-2.0-flash@001:generateContent",
     "gemini-2.0-flash@001"),
    ("up-bedrock", "amazon.nova-pro-v1:0", "/model/amazon.nova-pro-v1%3A0/converse", "amazon.nova-pro-v1:0"),
    ("up-bedrock", "arn:aws:bedrock:us-east-1:123:inference-profile/us.amazon.nova-pro-v1:0",
     "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.amazon.nova-pro-v1%3A0/converse",
     "arn:aws:bedrock:us-east-1:123:inference-profile/us.amazon.nova-pro-v1:0"),
    ("up-anthropic", "克劳德 🚀", "/v1/messages", "%E5%85%8B%E5%8A%B3%E5%BE%B7%20%F0%9F%9A%80"),
]


@pytest.mark.parametrize(("provider", "model", "upstream_path", "route_target"), ACCEPTED,
                         ids=[f"{p}:{m}" for p, m, _, _ in ACCEPTED])
def test_odd_names_are_encoded_as_one_segment(gw, mock, provider, model, upstream_path, route_target):
    client = anthropic.Anthropic(base_url=f"{gw.url}/{provider}/{quote(model, safe='')}", api_key="x",
                                 max_retries=0)
    raw = client.messages.with_raw_response.create(model="ignored", max_tokens=5,
                                                   messages=[{"role": "user", "content": "hi"}])
    assert raw.status_code == 200
    assert raw.headers["x-busbar-route-target"] == route_target
    msg = raw.parse()
    assert msg.type == "message" and msg.content[0].type == "text"
    sent = mock.requests()
    assert [r["raw_path"] for r in sent] == [upstream_path]
    if provider == "up-anthropic":        # the model travels in the body on the Messages protocol
        assert sent[0]["body"]["model"] == model


def test_vertex_claude_model_stays_in_its_segment(gw, mock):
    mock.script([{"match": {"path_prefix": "/v1/projects/"}, "response": {"status": 200, "body": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1}}}}])
    model = "claude-sonnet-4@20250514?x=1#f/y"
    client = anthropic.Anthropic(base_url=f"{gw.url}/up-vertex-claude/{quote(model, safe='')}", api_key="x",
                                 max_retries=0)
    raw = client.messages.with_raw_response.create(model="ignored", max_tokens=5,
                                                   messages=[{"role": "user", "content": "hi"}])
    assert raw.status_code == 200 and raw.parse().content[0].text == "ok"
    assert raw.headers["x-busbar-route-target"] == "claude-sonnet-4@20250514%3Fx=1%23f/y"
    assert [r["raw_path"] for r in mock.requests()] == [
        "/v1/projects/p1/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4@20250514%3Fx%3D1%23f%2Fy:rawPredict"]


def test_emoji_name_stream_reaches_the_client(gw, mock):
    """Case from issue 11 item 3: the header of a streamed reply used to break after the upstream call."""
    client = anthropic.Anthropic(base_url=f"{gw.url}/up-gemini/{quote('流式🚀', safe='')}", api_key="x",
                                 max_retries=0)
    with client.messages.with_streaming_response.create(
            model="ignored", max_tokens=5, stream=True,
            messages=[{"role": "user", "content": "hi"}]) as resp:
        assert resp.status_code == 200
        assert resp.headers["x-busbar-route-target"] == "%E6%B5%81%E5%BC%8F%F0%9F%9A%80"
        events = [json.loads(line[len("data: "):])["type"] for line in resp.iter_lines()
                  if line.startswith("data: ")]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert [r["raw_path"] for r in mock.requests()] == [
        "/v1beta/models/%E6%B5%81%E5%BC%8F%F0%9F%9A%80:streamGenerateContent"]


@pytest.mark.parametrize(("path", "body", "route_target", "upstream_path"), [
    ("/v1beta/models/odd%2541name:generateContent", GEMINI_BODY, "odd%2541name",
     "/v1beta/models/gemini-2.0-flash:generateContent"),
    ("/model/nova%2Feu/converse", BEDROCK_BODY, "nova/eu", "/model/amazon.nova-pro-v1%3A0/converse"),
])
def test_path_model_names_are_decoded_once(gw, mock, path, body, route_target, upstream_path):
    """``%2541`` in the request path names the configured model ``odd%41name`` (not ``oddAname``)."""
    status, headers, raw = raw_post(gw, path, body)
    assert status == 200, raw
    assert headers["x-busbar-route-target"] == route_target
    assert [r["raw_path"] for r in mock.requests()] == [upstream_path]
