"""The official openai and anthropic SDKs through a real busbar to the mock provider: all four
directions, streaming and not, plus a tool-call round trip each SDK parses into its typed objects."""
from __future__ import annotations

import json

import anthropic
import openai
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  oa-lane: { provider: up-openai, upstream_model: gpt-4o-mini }
  an-lane: { provider: up-anthropic, upstream_model: claude-3-5-haiku-latest, default_max_tokens: 8192 }
pools:
  to-openai: { members: [ { model: oa-lane } ] }
  to-anthropic: { members: [ { model: an-lane } ] }
"""

TOOLS_OA = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOOLS_AN = [{"name": "get_weather", "description": "Weather for a city",
             "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}]


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


@pytest.fixture()
def oa(gw):
    return openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)


@pytest.fixture()
def an(gw):
    return anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)


@pytest.mark.parametrize("pool,lane,upstream_path", [("to-openai", "oa-lane", "/v1/chat/completions"),
                                                      ("to-anthropic", "an-lane", "/v1/messages")])
def test_openai_sdk_non_stream(oa, mock, pool, lane, upstream_path):
    raw = oa.chat.completions.with_raw_response.create(
        model=pool, messages=[{"role": "system", "content": "be brief"},
                              {"role": "user", "content": "hello there"}])
    assert raw.status_code == 200
    assert raw.headers["x-busbar-route-target"] == lane
    r = raw.parse()
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert "hello there" in r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    sent = mock.requests()[-1]
    assert sent["path"] == upstream_path
    if pool == "to-anthropic":
        assert sent["body"]["model"] == "claude-3-5-haiku-latest"
        assert sent["body"]["system"] in ("be brief", [{"type": "text", "text": "be brief"}])
        assert sent["body"]["max_tokens"] == 8192           # lane default, never a small constant (C017)
        assert "tools" not in sent["body"] and "tool_choice" not in sent["body"]   # C011
        assert sent["headers"]["x-api-key"] == "sk-ant-api-test"
        assert sent["headers"]["anthropic-version"] == "2023-06-01"
    else:
        assert sent["body"]["model"] == "gpt-4o-mini"
        assert sent["headers"]["authorization"] == "Bearer sk-test-openai"


@pytest.mark.parametrize("pool,lane", [("to-openai", "oa-lane"), ("to-anthropic", "an-lane")])
def test_openai_sdk_stream(oa, pool, lane):
    with oa.chat.completions.with_streaming_response.create(
            model=pool, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "stream please"}]) as resp:
        assert resp.headers["x-busbar-route-target"] == lane
        chunks = list(resp.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "stream please" in text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert len({c.id for c in chunks}) == 1


@pytest.mark.parametrize("pool,lane", [("to-openai", "oa-lane"), ("to-anthropic", "an-lane")])
def test_anthropic_sdk_non_stream(an, pool, lane):
    raw = an.messages.with_raw_response.create(
        model=pool, max_tokens=200, system="be brief",
        messages=[{"role": "user", "content": "hello anthropic"}])
    assert raw.headers["x-busbar-route-target"] == lane
    m = raw.parse()
    assert m.type == "message" and m.role == "assistant"
    assert m.content[0].type == "text" and "hello anthropic" in m.content[0].text
    assert m.stop_reason == "end_turn"
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0


@pytest.mark.parametrize("pool,lane", [("to-openai", "oa-lane"), ("to-anthropic", "an-lane")])
def test_anthropic_sdk_stream(an, pool, lane):
    with an.messages.stream(model=pool, max_tokens=200,
                            messages=[{"role": "user", "content": "stream anthropic"}]) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert "stream anthropic" in text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0


@pytest.mark.parametrize("pool", ["to-openai", "to-anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_openai_sdk_tool_round_trip(oa, pool, stream):
    msgs = [{"role": "user", "content": "weather in Oslo?"}]
    if stream:
        with oa.chat.completions.stream(model=pool, messages=msgs, tools=TOOLS_OA) as s:
            for _ in s:
                pass
            first = s.get_final_completion()
    else:
        first = oa.chat.completions.create(model=pool, messages=msgs, tools=TOOLS_OA)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "test"}
    msgs += [choice.message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"}]
    second = oa.chat.completions.create(model=pool, messages=msgs, tools=TOOLS_OA)
    assert second.choices[0].finish_reason == "stop"
    assert "sunny, 21C" in second.choices[0].message.content


@pytest.mark.parametrize("pool", ["to-openai", "to-anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_tool_round_trip(an, pool, stream):
    msgs = [{"role": "user", "content": "weather in Oslo?"}]
    if stream:
        with an.messages.stream(model=pool, max_tokens=300, messages=msgs, tools=TOOLS_AN) as s:
            first = s.get_final_message()
    else:
        first = an.messages.create(model=pool, max_tokens=300, messages=msgs, tools=TOOLS_AN)
    assert first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.name == "get_weather" and use.input == {"city": "test"}
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                           "content": "sunny, 21C"}]}]
    second = an.messages.create(model=pool, max_tokens=300, messages=msgs, tools=TOOLS_AN)
    assert second.stop_reason == "end_turn"
    assert "sunny, 21C" in second.content[0].text


def test_path_named_pool_and_direct_model(gw, an):
    path_client = anthropic.Anthropic(base_url=gw.url + "/to-openai", api_key="x", max_retries=0)
    raw = path_client.messages.with_raw_response.create(
        model="ignored-body-model", max_tokens=50, messages=[{"role": "user", "content": "hi"}])
    assert raw.headers["x-busbar-route-target"] == "oa-lane"
    direct = an.messages.with_raw_response.create(model="an-lane", max_tokens=50,
                                                  messages=[{"role": "user", "content": "hi"}])
    assert direct.headers["x-busbar-route-target"] == "an-lane"


def test_adhoc_provider_model_route(gw, mock):
    client = anthropic.Anthropic(base_url=gw.url + "/up-anthropic/claude-adhoc-1", api_key="x", max_retries=0)
    raw = client.messages.with_raw_response.create(model="whatever", max_tokens=50,
                                                   messages=[{"role": "user", "content": "adhoc"}])
    assert raw.status_code == 200
    assert raw.headers["x-busbar-route-target"] == "claude-adhoc-1"
    assert mock.requests()[-1]["body"]["model"] == "claude-adhoc-1"


def test_models_list_and_healthz(gw, oa):
    ids = [m.id for m in oa.models.list()]
    assert ids == ["to-openai", "to-anthropic", "oa-lane", "an-lane"]
    import httpx
    r = httpx.get(gw.url + "/healthz")
    assert (r.status_code, r.text) == (200, "ok")


def test_translation_dropped_header_and_strict_pool(gateway_factory, mock):
    cfg = CONFIG + """  strict-anthropic: { members: [ { model: an-lane } ], translation: strict }
"""
    gw2 = gateway_factory(cfg, mock.url)
    body = {"messages": [{"role": "user", "content": "hi"}], "logprobs": True, "service_tier": "auto"}
    import httpx
    r = httpx.post(gw2.url + "/v1/chat/completions", json={"model": "to-anthropic", **body})
    assert r.status_code == 200
    assert r.headers["x-busbar-translation-dropped"] == "logprobs, service_tier"
    r = httpx.post(gw2.url + "/v1/chat/completions", json={"model": "strict-anthropic", **body})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == ("translation: strict refuses a lossy hop to anthropic (lane "
                                            "'an-lane'): it would drop logprobs, service_tier")
    r = httpx.post(gw2.url + "/v1/chat/completions", json={"model": "strict-anthropic",
                                                            "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200 and "x-busbar-translation-dropped" not in r.headers
