"""Gemini ingress casing through a real busbar (issue 11 item 24, case C041): a snake_case body,
the same body in camelCase and the two spellings mixed produce identical upstream requests on an
Anthropic lane and on a Gemini lane (written in camelCase, no snake_case key left), for
``:generateContent``, ``:streamGenerateContent`` and ``:countTokens``; a field set in both
spellings is a 400 ``INVALID_ARGUMENT`` naming it, with no upstream call."""
from __future__ import annotations

import json

import httpx
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  an: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
  gm: { protocol: gemini, base_url: MOCK, api_key: { env: T_GEMINI_KEY } }
models:
  an-m: { provider: an, default_max_tokens: 1024 }
  gm-m: { provider: gm }
pools:
  to-anthropic: { members: [ { model: an-m } ] }
  to-gemini: { members: [ { model: gm-m } ] }
"""
SNAKE = {"system_instruction": {"parts": [{"text": "Answer in French"}]},
         "contents": [{"role": "user", "parts": [{"text": "hi"},
                                                 {"inline_data": {"mime_type": "image/png", "data": "aW1n"}}]}],
         "generation_config": {"max_output_tokens": 64, "stop_sequences": ["END"]},
         "tools": [{"function_declarations": [{"name": "f", "parameters": {"type": "object", "properties": {}}}]}],
         "tool_config": {"function_calling_config": {"mode": "ANY", "allowed_function_names": ["f"]}}}
CAMEL = {"systemInstruction": {"parts": [{"text": "Answer in French"}]},
         "contents": [{"role": "user", "parts": [{"text": "hi"},
                                                 {"inlineData": {"mimeType": "image/png", "data": "aW1n"}}]}],
         "generationConfig": {"maxOutputTokens": 64, "stopSequences": ["END"]},
         "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object", "properties": {}}}]}],
         "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}}
MIXED = {"system_instruction": CAMEL["systemInstruction"], "contents": SNAKE["contents"],
         "generationConfig": {"max_output_tokens": 64, "stopSequences": ["END"]},
         "tools": CAMEL["tools"], "tool_config": {"functionCallingConfig": {"mode": "ANY",
                                                                           "allowed_function_names": ["f"]}}}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url, env={"T_GEMINI_KEY": "g-key"})


def keys(obj, skip=("parameters",)):
    """Every object key in ``obj``, not descending into ``skip`` values."""
    if isinstance(obj, dict):
        return [k for k, v in obj.items() for k in [k, *([] if k in skip else keys(v, skip))]]
    if isinstance(obj, list):
        return [k for v in obj for k in keys(v, skip)]
    return []


def upstream_bodies(gw, mock, pool: str, verb: str) -> list:
    bodies = []
    for body in (SNAKE, CAMEL, MIXED):
        mock.clear()
        r = httpx.post(f"{gw.url}/v1beta/models/{pool}:{verb}", json=body, timeout=10,
                       headers={"x-goog-api-key": "x"})
        assert r.status_code == 200, r.text
        [req] = mock.requests()
        bodies.append(req["body"])
    return bodies


def test_c041_three_spellings_one_anthropic_request(gw, mock):
    snake, camel, mixed = upstream_bodies(gw, mock, "to-anthropic", "generateContent")
    assert snake == camel == mixed
    assert snake["system"] == "Answer in French"
    assert snake["messages"][0]["content"][1]["source"]["media_type"] == "image/png"
    assert snake["max_tokens"] == 64 and snake["stop_sequences"] == ["END"]
    assert [t["name"] for t in snake["tools"]] == ["f"]
    assert snake["tool_choice"] == {"type": "tool", "name": "f"}


@pytest.mark.parametrize("verb", ["generateContent", "streamGenerateContent?alt=sse"])
def test_c041_three_spellings_one_camel_case_gemini_request(gw, mock, verb):
    snake, camel, mixed = upstream_bodies(gw, mock, "to-gemini", verb)
    assert snake == camel == mixed == CAMEL
    assert [k for k in keys(snake) if "_" in k] == []


def test_count_tokens_is_served_in_camel_case(gw, mock):
    answer = {"totalTokens": 31, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 31}]}
    bodies = []
    for body in ({"contents": SNAKE["contents"]}, {"contents": CAMEL["contents"]},
                 {"generate_content_request": SNAKE}):
        mock.clear()
        mock.script([{"match": {"path_prefix": "/v1beta/models/gm-m:countTokens"},
                      "response": {"status": 200, "body": answer}}])
        r = httpx.post(f"{gw.url}/v1beta/models/to-gemini:countTokens", json=body, timeout=10)
        assert r.status_code == 200, r.text
        assert r.json() == answer
        [req] = mock.requests()
        assert req["path"] == "/v1beta/models/gm-m:countTokens"
        bodies.append(req["body"])
    assert bodies[0] == bodies[1] == {"generateContentRequest": {"contents": CAMEL["contents"],
                                                                 "model": "models/gm-m"}}
    assert bodies[2] == {"generateContentRequest": {**CAMEL, "model": "models/gm-m"}}


def test_count_tokens_on_a_lane_of_another_protocol_is_a_400(gw, mock):
    r = httpx.post(f"{gw.url}/v1beta/models/to-anthropic:countTokens", json={"contents": CAMEL["contents"]},
                   timeout=10)
    assert r.status_code == 400
    assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert r.json()["error"]["message"] == ("countTokens is answered by Gemini lanes only; this pool or model "
                                            "has a lane of another protocol")
    assert mock.requests() == []


@pytest.mark.parametrize("pool", ["to-anthropic", "to-gemini"])
def test_a_field_in_both_spellings_is_a_400_naming_it(gw, mock, pool):
    body = {**CAMEL, "system_instruction": {"parts": [{"text": "other"}]}}
    r = httpx.post(f"{gw.url}/v1beta/models/{pool}:generateContent", content=json.dumps(body), timeout=10,
                   headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json() == {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                        'systemInstruction: set twice, as "system_instruction" and "systemInstruction"; '
                        "send one spelling"}}
    nested = {**CAMEL, "generationConfig": {"maxOutputTokens": 64, "max_output_tokens": 64}}
    r = httpx.post(f"{gw.url}/v1beta/models/{pool}:generateContent", json=nested, timeout=10)
    assert r.json()["error"]["message"] == ('generationConfig.maxOutputTokens: set twice, as "max_output_tokens" '
                                            'and "maxOutputTokens"; send one spelling')
    assert mock.requests() == []
