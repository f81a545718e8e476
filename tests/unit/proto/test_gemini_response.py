"""Gemini responses and errors: the captures field by field, C008 finish reasons, C038 usage, C037 ids, envelopes."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest
from busbar.ir.model import IrRequest, IrResponse, StopReason, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.bedrock import DIALECT as BEDROCK
from busbar.proto.gemini import DIALECT
from busbar.proto.gemini.ids import MINTED_PREFIX, carry, split
from busbar.proto.openai import DIALECT as OPENAI
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / "gemini" / name).read_text())


def candidate(parts: list[dict], finish: str | None = "STOP", usage: dict | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    }
    if finish:
        body["candidates"][0]["finishReason"] = finish
    if usage:
        body["usageMetadata"] = usage
    return body


# ---------------------------------------------------------------- the captures


def test_read_text_basic_capture_counts_thoughts_as_output() -> None:
    r = DIALECT.read_response(fixture("text-basic.response.json"))
    assert (r.id, r.model) == ("bzlXaa_EE_aHqtsPi_zw8Ao", "gemini-2.5-flash")
    assert r.content == [TextBlock("Hello! How can I help you today?")]
    assert r.stop_reason is StopReason.END_TURN
    assert r.usage == Usage(input_tokens=9, output_tokens=43, reasoning_tokens=34)


def test_read_function_call_capture_mints_an_id_and_means_tool_use() -> None:
    r = DIALECT.read_response(fixture("function-call.response.json"))
    [call] = r.content
    assert isinstance(call, ToolUseBlock)
    assert (call.name, call.input, call.thought_signature) == ("get_user_country", {}, None)
    assert call.id.startswith(MINTED_PREFIX) and re.fullmatch(r"[a-zA-Z0-9_-]+", call.id)
    assert r.stop_reason is StopReason.TOOL_USE
    assert r.usage == Usage(input_tokens=33, output_tokens=5)


def test_read_cached_content_capture_splits_cache_reads_out_of_the_prompt() -> None:
    r = DIALECT.read_response(fixture("cached-content.response.json"))
    assert r.usage == Usage(input_tokens=8, output_tokens=53, cache_read_tokens=3512, reasoning_tokens=51)
    oa = OPENAI.write_response(r, "p", IrRequest())["usage"]
    assert oa == {
        "prompt_tokens": 3520,
        "completion_tokens": 53,
        "total_tokens": 3573,
        "prompt_tokens_details": {"cached_tokens": 3512},
        "completion_tokens_details": {"reasoning_tokens": 51},
    }


def test_read_image_capture() -> None:
    r = DIALECT.read_response(fixture("image-inline-data.response.json"))
    assert r.content == [TextBlock("That is a potato.")]
    assert r.usage == Usage(input_tokens=1817, output_tokens=5)


@pytest.mark.parametrize("name", ["text-basic", "function-call", "cached-content", "image-inline-data"])
def test_write_response_rebuilds_every_capture(name: str) -> None:
    body = fixture(f"{name}.response.json")
    out = DIALECT.write_response(DIALECT.read_response(body), "gemini-x", IrRequest())
    cand, orig = out["candidates"][0], body["candidates"][0]
    assert cand["finishReason"] == orig["finishReason"]
    parts = [{k: v for k, v in p.items()} for p in cand["content"]["parts"]]
    for p in parts:
        if "functionCall" in p:
            p["functionCall"].pop("id")
    assert parts == orig["content"]["parts"]
    u, ou = out["usageMetadata"], body["usageMetadata"]
    for key in ("promptTokenCount", "candidatesTokenCount", "totalTokenCount"):
        assert u[key] == ou[key]
    assert u.get("thoughtsTokenCount") == ou.get("thoughtsTokenCount")
    assert u.get("cachedContentTokenCount") == ou.get("cachedContentTokenCount")
    assert out["modelVersion"] == "gemini-x" and len(out["responseId"]) == 23


# ---------------------------------------------------------------- C008: finish reasons


@pytest.mark.parametrize(
    ("finish", "parts", "openai", "anthropic", "bedrock"),
    [
        ("STOP", [{"text": "Quail"}], "stop", "end_turn", "end_turn"),
        ("MAX_TOKENS", [{"text": "Quail"}], "length", "max_tokens", "max_tokens"),
        ("STOP", [{"functionCall": {"name": "f", "args": {}}}], "tool_calls", "tool_use", "tool_use"),
        *[
            (f, [{"text": "x"}], "content_filter", "refusal", "content_filtered")
            for f in ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY")
        ],
        ("OTHER", [{"text": "x"}], "stop", "end_turn", "end_turn"),
        ("SOMETHING_NEW", [{"text": "x"}], "stop", "end_turn", "end_turn"),
    ],
)
def test_c008_finish_reasons_for_every_client(
    finish: str, parts: list, openai: str, anthropic: str, bedrock: str
) -> None:
    r = DIALECT.read_response(candidate(parts, finish))
    assert OPENAI.write_response(r, "p", IrRequest())["choices"][0]["finish_reason"] == openai
    assert ANTHROPIC.write_response(r, "p", IrRequest())["stop_reason"] == anthropic
    assert BEDROCK.write_response(r, "p", IrRequest())["stopReason"] == bedrock


def test_c008_max_tokens_text_reaches_an_openai_client() -> None:
    r = DIALECT.read_response(candidate([{"text": "Quail"}], "MAX_TOKENS"))
    choice = OPENAI.write_response(r, "p", IrRequest())["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] == "Quail"


@pytest.mark.parametrize("finish", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"])
def test_malformed_function_calls_are_errors(finish: str) -> None:
    assert DIALECT.read_response(candidate([], finish)).stop_reason is StopReason.ERROR


def test_a_blocked_prompt_is_a_safety_stop() -> None:
    r = DIALECT.read_response(
        {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}}
    )
    assert r.content == [] and r.stop_reason is StopReason.SAFETY and r.usage.input_tokens == 4


@pytest.mark.parametrize(
    ("ir", "wire"),
    [
        (StopReason.END_TURN, "STOP"),
        (StopReason.STOP_SEQUENCE, "STOP"),
        (StopReason.MAX_TOKENS, "MAX_TOKENS"),
        (StopReason.TOOL_USE, "STOP"),
        (StopReason.SAFETY, "SAFETY"),
        (StopReason.REFUSAL, "SAFETY"),
        (StopReason.PAUSE_TURN, "STOP"),
        (StopReason.ERROR, "OTHER"),
        (StopReason.OTHER, "STOP"),
        (None, "STOP"),
    ],
)
def test_every_ir_stop_reason_has_a_gemini_value(ir: StopReason | None, wire: str) -> None:
    out = DIALECT.write_response(IrResponse(stop_reason=ir), "m", IrRequest())
    assert out["candidates"][0]["finishReason"] == wire


# ---------------------------------------------------------------- C038: thinking tokens are output


C038_USAGE = {
    "promptTokenCount": 1200,
    "candidatesTokenCount": 300,
    "thoughtsTokenCount": 900,
    "totalTokenCount": 2400,
}


def test_c038_usage_for_openai_and_anthropic_clients() -> None:
    r = DIALECT.read_response(candidate([{"text": "ok"}], usage=C038_USAGE))
    assert OPENAI.write_response(r, "p", IrRequest())["usage"] == {
        "prompt_tokens": 1200,
        "completion_tokens": 1200,
        "total_tokens": 2400,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 900},
    }
    assert ANTHROPIC.write_response(r, "p", IrRequest())["usage"]["output_tokens"] == 1200
    cost = r.usage.input_tokens * 0.30e-6 + r.usage.output_tokens * 2.50e-6
    assert abs(cost - 0.00336) < 1e-9
    back = DIALECT.write_response(r, "m", IrRequest())["usageMetadata"]
    assert back == {
        "promptTokenCount": 1200,
        "candidatesTokenCount": 300,
        "totalTokenCount": 2400,
        "thoughtsTokenCount": 900,
    }


def test_c038_without_thoughts_completion_is_candidates() -> None:
    r = DIALECT.read_response(
        candidate([{"text": "ok"}], usage={"promptTokenCount": 5, "candidatesTokenCount": 3})
    )
    assert r.usage == Usage(input_tokens=5, output_tokens=3)


# ---------------------------------------------------------------- C037 / C039: calls in answers


def test_c037_the_signature_rides_in_the_tool_call_id_and_only_on_the_signed_part() -> None:
    r = DIALECT.read_response(
        candidate(
            [
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
                    "thoughtSignature": "U0lHX0E=",
                },
                {"functionCall": {"name": "get_time", "args": {"tz": "CET"}}},
            ]
        )
    )
    first, second = r.content
    assert isinstance(first, ToolUseBlock) and isinstance(second, ToolUseBlock)
    assert first.thought_signature == "U0lHX0E=" and second.thought_signature is None
    assert split(first.id) == (first.id.split("__thought__")[0], "U0lHX0E=")
    assert split(second.id) == (second.id, None)
    for block in (first, second):
        assert re.fullmatch(r"[a-zA-Z0-9_-]+", block.id)
    msg = ANTHROPIC.write_response(r, "p", IrRequest())
    assert [c["id"] for c in msg["content"]] == [first.id, second.id]


def test_c037_gemini_ids_are_kept_and_visible_text_with_a_signature_stays_text() -> None:
    r = DIALECT.read_response(
        candidate(
            [
                {"text": "Let me check.", "thoughtSignature": "VEVYVA=="},
                {"functionCall": {"id": "fc_1", "name": "f", "args": {}}, "thoughtSignature": "U0lH"},
            ]
        )
    )
    assert r.content[0] == TextBlock("Let me check.")
    call = r.content[1]
    assert isinstance(call, ToolUseBlock)
    assert call.id == carry("fc_1", "U0lH") and split(call.id) == ("fc_1", "U0lH")


def test_thought_parts_become_one_thinking_block_with_its_signature() -> None:
    r = DIALECT.read_response(
        candidate(
            [
                {"text": "Plan: ", "thought": True},
                {"text": "look up.", "thought": True, "thoughtSignature": "VDE="},
                {"text": "Answer."},
            ]
        )
    )
    assert r.content == [ThinkingBlock("Plan: look up.", "VDE="), TextBlock("Answer.")]
    out = DIALECT.write_response(r, "m", IrRequest())["candidates"][0]["content"]["parts"]
    assert out == [
        {"text": "Plan: look up.", "thought": True, "thoughtSignature": "VDE="},
        {"text": "Answer."},
    ]


@pytest.mark.parametrize(
    ("sig", "ok"),
    [
        ("U0lHX0E=", True),
        ("U0lHX0E", True),
        ("_9j_4AAQ", True),
        ("Eu4CCkgI+/==", False),
        ("SIG", False),
        ("a b", False),
        ("", False),
    ],
)
def test_only_base64_signatures_reach_a_gemini_client(sig: str, ok: bool) -> None:
    r = IrResponse(content=[ThinkingBlock("t", sig), ToolUseBlock("c1", "f", {}, thought_signature=sig)])
    parts = DIALECT.write_response(r, "m", IrRequest())["candidates"][0]["content"]["parts"]
    assert [("thoughtSignature" in p) for p in parts] == [ok, ok]


def test_c039_answer_args_keep_integers_and_missing_args_are_empty() -> None:
    r = DIALECT.read_response(
        candidate(
            [
                {"functionCall": {"name": "count_items", "args": {"count": 3, "ratio": 0.5}}},
                {"functionCall": {"name": "no_args"}},
            ]
        )
    )
    calls = OPENAI.write_response(r, "p", IrRequest())["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"count":3,"ratio":0.5}', "{}"]


def test_write_response_from_anthropic_tools_and_thinking() -> None:
    r = ANTHROPIC.read_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "U0lH"},
                {"type": "redacted_thinking", "data": "R"},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "usage": {
                "input_tokens": 3,
                "output_tokens": 4,
                "cache_read_input_tokens": 5,
                "cache_creation_input_tokens": 6,
            },
        }
    )
    out = DIALECT.write_response(r, "claude-pool", IrRequest())
    assert out["candidates"] == [
        {
            "content": {
                "parts": [
                    {"text": "hm", "thought": True, "thoughtSignature": "U0lH"},
                    {"text": "ok"},
                    {"functionCall": {"id": "toolu_1", "name": "f", "args": {"a": 1}}},
                ],
                "role": "model",
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ]
    assert out["usageMetadata"] == {
        "promptTokenCount": 14,
        "candidatesTokenCount": 4,
        "totalTokenCount": 18,
        "cachedContentTokenCount": 5,
    }
    assert out["modelVersion"] == "claude-pool"


# ---------------------------------------------------------------- errors

ERRORS = [
    (ErrorKind.INVALID_REQUEST, 400, 400, "INVALID_ARGUMENT"),
    (ErrorKind.PERMISSION, 403, 403, "PERMISSION_DENIED"),
    (ErrorKind.NOT_FOUND, 404, 404, "NOT_FOUND"),
    (ErrorKind.REQUEST_TOO_LARGE, 413, 413, "INVALID_ARGUMENT"),
    (ErrorKind.RATE_LIMIT, 429, 429, "RESOURCE_EXHAUSTED"),
    ("insufficient_quota", 429, 429, "RESOURCE_EXHAUSTED"),
    ("model_not_found", 404, 404, "NOT_FOUND"),
    (ErrorKind.API_ERROR, 500, 500, "INTERNAL"),
    (ErrorKind.API_ERROR, 502, 502, "INTERNAL"),
    (ErrorKind.OVERLOADED, 503, 503, "UNAVAILABLE"),
    (ErrorKind.TIMEOUT, 504, 504, "DEADLINE_EXCEEDED"),
]


@pytest.mark.parametrize(("kind", "status", "out", "name"), ERRORS)
def test_error_response_is_the_google_rpc_envelope(kind: str, status: int, out: int, name: str) -> None:
    st, headers, body = DIALECT.error_response(status, kind, "no")
    assert st == out
    assert orjson.loads(body) == {"error": {"code": out, "message": "no", "status": name}}
    assert headers == {"content-type": "application/json; charset=UTF-8"}


def test_authentication_failure_looks_like_googles_invalid_key() -> None:
    st, _, body = DIALECT.error_response(
        401, ErrorKind.AUTHENTICATION, "API key not valid. Please pass a valid API key."
    )
    assert st == 400
    err = orjson.loads(body)["error"]
    ref = fixture("error-400-api-key-invalid.response.json")["error"]
    assert (err["code"], err["message"], err["status"]) == (ref["code"], ref["message"], ref["status"])
    assert err["details"][0] == ref["details"][0]


def test_read_error_captures() -> None:
    raw = (FIXTURES / "gemini" / "error-429-resource-exhausted.response.json").read_bytes()
    info = DIALECT.read_error(429, raw)
    assert info.code == "RESOURCE_EXHAUSTED" and info.type == "RESOURCE_EXHAUSTED"
    assert info.message.startswith(
        "You exceeded your current quota, please check your plan and billing details."
    )
    raw = (FIXTURES / "gemini" / "error-400-api-key-invalid.response.json").read_bytes()
    assert DIALECT.read_error(400, raw) == UpstreamErrorInfo(
        "API_KEY_INVALID", "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'[{"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}]',
            UpstreamErrorInfo("UNAVAILABLE", "busy", "UNAVAILABLE"),
        ),
        (b"<html>Bad Gateway</html>", UpstreamErrorInfo(None, "<html>Bad Gateway</html>")),
        (b'{"error": {"code": 500, "message": "cut sh', UpstreamErrorInfo(None, "cut sh", None)),
    ],
)
def test_read_error_tolerates_other_shapes(body: bytes, expected: UpstreamErrorInfo) -> None:
    assert DIALECT.read_error(502, body) == expected


def test_c018_gemini_resource_exhausted_stays_429_for_openai_and_anthropic() -> None:
    info = DIALECT.read_error(429, b'{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"quota"}}')
    st, _, body = OPENAI.error_response(429, ErrorKind.from_status(429), info.message)
    assert st == 429 and orjson.loads(body)["error"]["code"] == "rate_limit_exceeded"
    st, _, body = ANTHROPIC.error_response(429, ErrorKind.from_status(429), info.message)
    assert st == 429 and orjson.loads(body)["error"]["type"] == "rate_limit_error"
