"""Cohere v2 Chat non-stream responses: provider body -> IR and IR -> client body (with cohere-python)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import cohere
import httpx
import pytest
from busbar.ir.model import IrRequest, IrResponse, StopReason, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.base import ErrorKind
from busbar.proto.cohere import DIALECT
from busbar.proto.cohere.errors import CohereAnswerError
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.registry import DIALECTS
from busbar.proto.responses import DIALECT as RESPONSES
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def load(name: str) -> Any:
    return json.loads((FIXTURES / "cohere" / name).read_text())


def sdk_chat(body: dict[str, Any]) -> Any:
    """cohere-python's ``ClientV2.chat`` over ``body`` served as the HTTP answer."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, content=json.dumps(body))

    client: Any = cohere.ClientV2(
        api_key="k",
        base_url="http://busbar.test",
        max_retries=0,
        httpx_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    return client.chat(model="pool", messages=[{"role": "user", "content": "x"}])


# ---------------------------------------------------------------- read_response: fixtures


def test_fixture_chat_text() -> None:
    src = load("chat-text.response.json")
    r = DIALECT.read_response(src)
    assert r.id == "83e3e297-264b-478e-9b22-5058386292ed"
    assert r.content == [TextBlock(src["message"]["content"][0]["text"])]
    assert r.stop_reason is StopReason.END_TURN
    assert r.usage == Usage(input_tokens=69, output_tokens=89)     # tokens, not billed_units


def test_fixture_tool_call_plan_then_calls() -> None:
    r = DIALECT.read_response(load("tool-call.response.json"))
    assert r.content == [
        TextBlock("I will search for the current time and weather in Tokyo."),
        ToolUseBlock("get_time_dp3men9jrvhf", "get_time", {"location": "Tokyo"}),
        ToolUseBlock("get_weather_d7arjgsc96yf", "get_weather", {"location": "Tokyo"}),
    ]
    assert r.stop_reason is StopReason.TOOL_USE
    assert r.usage == Usage(input_tokens=968, output_tokens=83)


def test_fixture_tool_result_followup_with_citations() -> None:
    r = DIALECT.read_response(load("tool-result-followup.response.json"))
    assert r.content == [
        TextBlock("The current time in Tokyo is 4:20 PM and the weather is sunny with a temperature of 20°C.")
    ]
    assert r.stop_reason is StopReason.END_TURN and r.usage == Usage(input_tokens=1094, output_tokens=102)


def test_fixture_thinking() -> None:
    src = load("thinking.response.json")
    r = DIALECT.read_response(src)
    content = src["message"]["content"]
    assert r.content == [ThinkingBlock(content[0]["thinking"]), TextBlock(content[1]["text"])]
    assert r.usage == Usage(input_tokens=2190, output_tokens=1257)


def test_tokens_used_when_billed_units_absent_and_cached_tokens_split_out() -> None:
    body = {
        "message": {"content": []},
        "finish_reason": "COMPLETE",
        "usage": {"tokens": {"input_tokens": 100, "output_tokens": 9}, "cached_tokens": 40},
    }
    assert DIALECT.read_response(body).usage == Usage(input_tokens=60, output_tokens=9, cache_read_tokens=40)


# ---------------------------------------------------------------- C043: finish reasons


C043 = [
    # finish, IR, OpenAI, Anthropic, Gemini, Responses (status, incomplete reason)
    ("COMPLETE", StopReason.END_TURN, "stop", "end_turn", "STOP", ("completed", None)),
    ("STOP_SEQUENCE", StopReason.STOP_SEQUENCE, "stop", "stop_sequence", "STOP", ("completed", None)),
    (
        "MAX_TOKENS",
        StopReason.MAX_TOKENS,
        "length",
        "max_tokens",
        "MAX_TOKENS",
        ("incomplete", "max_output_tokens"),
    ),
    ("TOOL_CALL", StopReason.TOOL_USE, "tool_calls", "tool_use", "STOP", ("completed", None)),
]


def _body(finish: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": "x"}]}
    if finish == "TOOL_CALL":
        msg = {
            "role": "assistant",
            "tool_plan": "p",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        }
    return {
        "id": "u",
        "message": msg,
        "finish_reason": finish,
        "usage": {"billed_units": {"input_tokens": 1, "output_tokens": 2}},
    }


@pytest.mark.parametrize("finish,ir,oai,ant,gem,resp", C043, ids=[c[0] for c in C043])
def test_c043_finish_reasons_reach_every_client_normalized(
    finish: str, ir: StopReason, oai: str, ant: str, gem: str, resp: tuple[str, str | None]
) -> None:
    r = DIALECT.read_response(_body(finish))
    assert r.stop_reason is ir
    assert OPENAI.write_response(r, "pool", IrRequest())["choices"][0]["finish_reason"] == oai
    assert ANTHROPIC.write_response(r, "pool", IrRequest())["stop_reason"] == ant
    out = RESPONSES.write_response(r, "pool", IrRequest())
    details = out["incomplete_details"]
    assert (out["status"], details["reason"] if details else None) == resp
    if "gemini" in DIALECTS:  # the Gemini dialect is built in a sibling change
        g = DIALECTS["gemini"].write_response(r, "pool", IrRequest())
        assert g["candidates"][0]["finishReason"] == gem


@pytest.mark.parametrize(
    "finish,kind",
    [("ERROR", ErrorKind.API_ERROR), ("ERROR_TOXIC", ErrorKind.API_ERROR), ("TIMEOUT", ErrorKind.TIMEOUT)],
)
def test_c043_error_and_timeout_are_not_answers(finish: str, kind: str) -> None:
    with pytest.raises(CohereAnswerError) as e:
        DIALECT.read_response(_body(finish))
    assert e.value.kind == kind and e.value.message == f"upstream finished with {finish}"


def test_no_upper_case_value_reaches_openai_or_anthropic() -> None:
    for finish, *_ in C043:
        r = DIALECT.read_response(_body(finish))
        values = [
            OPENAI.write_response(r, "m", IrRequest())["choices"][0]["finish_reason"],
            ANTHROPIC.write_response(r, "m", IrRequest())["stop_reason"],
        ]
        assert all(v == v.lower() for v in values)


# ---------------------------------------------------------------- write_response


def test_write_response_from_an_anthropic_tool_answer_and_the_sdk_parses_it() -> None:
    upstream = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "S"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 7, "cache_read_input_tokens": 3},
    }
    out = DIALECT.write_response(ANTHROPIC.read_response(upstream), "pool", IrRequest())
    assert str(uuid.UUID(out["id"])) == out["id"]
    assert list(out) == ["id", "message", "finish_reason", "usage"]
    assert out["message"] == {
        "role": "assistant",
        "tool_plan": "Let me check.",
        "content": [{"type": "thinking", "thinking": "hm"}],
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
            }
        ],
    }
    assert out["finish_reason"] == "TOOL_CALL"
    assert out["usage"] == {
        "billed_units": {"input_tokens": 23, "output_tokens": 7},
        "tokens": {"input_tokens": 23, "output_tokens": 7},
        "cached_tokens": 3,
    }
    parsed = sdk_chat(out)
    assert parsed.finish_reason == "TOOL_CALL" and parsed.message.tool_plan == "Let me check."
    assert parsed.message.tool_calls[0].function.arguments == '{"city":"Oslo"}'


def test_write_text_response_and_native_uuid_kept() -> None:
    src = load("chat-text.response.json")
    out = DIALECT.write_response(DIALECT.read_response(src), "command", IrRequest())
    assert out == {
        **src,
        "usage": {"billed_units": src["usage"]["tokens"], "tokens": src["usage"]["tokens"]},
    }
    parsed = sdk_chat(out)
    assert parsed.message.content[0].text == src["message"]["content"][0]["text"]


@pytest.mark.parametrize(
    "reason,finish",
    [
        (StopReason.END_TURN, "COMPLETE"),
        (StopReason.STOP_SEQUENCE, "STOP_SEQUENCE"),
        (StopReason.MAX_TOKENS, "MAX_TOKENS"),
        (StopReason.TOOL_USE, "TOOL_CALL"),
        (StopReason.SAFETY, "COMPLETE"),
        (StopReason.REFUSAL, "COMPLETE"),
        (StopReason.PAUSE_TURN, "COMPLETE"),
        (StopReason.ERROR, "ERROR"),
        (StopReason.OTHER, "COMPLETE"),
        (None, "COMPLETE"),
    ],
)
def test_every_stop_reason_maps_to_a_valid_finish_reason(reason: StopReason | None, finish: str) -> None:
    out = DIALECT.write_response(
        IrResponse(id="chatcmpl-x", content=[TextBlock("x")], stop_reason=reason), "m", IrRequest()
    )
    assert out["finish_reason"] == finish and out["id"] != "chatcmpl-x"
