"""Bedrock Converse responses and errors: the captures read field by field, C047 stop reasons, C018/C020 errors."""

from __future__ import annotations

import json
import uuid
from typing import Any

import orjson
import pytest
from busbar.ir.model import IrRequest, IrResponse, StopReason, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.bedrock import DIALECT
from busbar.proto.gemini import DIALECT as GEMINI
from busbar.proto.openai import DIALECT as OPENAI
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / "bedrock" / name).read_text())


def raw(name: str) -> bytes:
    return (FIXTURES / "bedrock" / name).read_bytes()


# ---------------------------------------------------------------- the captures


def test_read_text_capture() -> None:
    r = DIALECT.read_response(fixture("converse-text.response.json"))
    assert r.id is None and r.model is None
    assert r.content == [
        TextBlock(
            "Why did the OpenTelemetry trace go to therapy?\n\nBecause it was struggling to debug its issues "
            'and was feeling a little "unreliable".'
        )
    ]
    assert r.stop_reason is StopReason.END_TURN
    assert r.usage == Usage(input_tokens=52, output_tokens=30)


def test_read_tool_use_capture() -> None:
    r = DIALECT.read_response(fixture("converse-tool-use.response.json"))
    assert r.content == [
        ToolUseBlock(
            "tooluse_Mj06ft-ITJik1Otgpkc1uA", "temperature", {"city": "London", "date": "2022-01-01"}
        )
    ]
    assert r.stop_reason is StopReason.TOOL_USE
    assert r.usage == Usage(input_tokens=571, output_tokens=22)


def test_read_reasoning_capture_keeps_the_signature() -> None:
    body = fixture("converse-reasoning.response.json")
    r = DIALECT.read_response(body)
    thinking, text = r.content
    rt = body["output"]["message"]["content"][0]["reasoningContent"]["reasoningText"]
    assert thinking == ThinkingBlock(rt["text"], rt["signature"])
    assert isinstance(text, TextBlock) and text.text.startswith("Here are the basic steps")
    assert r.stop_reason is StopReason.END_TURN


def test_read_cache_write_capture_usage() -> None:
    r = DIALECT.read_response(fixture("converse-prompt-cache-write.response.json"))
    assert r.usage == Usage(input_tokens=2, output_tokens=5, cache_read_tokens=0, cache_write_tokens=1322)
    assert r.content == [TextBlock("21")]


def test_read_image_capture() -> None:
    r = DIALECT.read_response(fixture("converse-image.response.json"))
    assert isinstance(r.content[0], TextBlock) and r.content[0].text.startswith("The image shows a potato.")
    assert r.usage == Usage(input_tokens=1837, output_tokens=82)


def test_cache_usage_carries_to_openai_and_anthropic_clients() -> None:
    r = DIALECT.read_response(fixture("converse-prompt-cache-write.response.json"))
    oa = OPENAI.write_response(r, "pool", IrRequest())
    assert oa["usage"]["prompt_tokens"] == 1324 and oa["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 0
    }
    an = ANTHROPIC.write_response(r, "pool", IrRequest())
    assert an["usage"] == {
        "input_tokens": 2,
        "cache_creation_input_tokens": 1322,
        "cache_read_input_tokens": 0,
        "output_tokens": 5,
    }


@pytest.mark.parametrize(
    "name",
    [
        "converse-text",
        "converse-tool-use",
        "converse-reasoning",
        "converse-prompt-cache-write",
        "converse-image",
    ],
)
def test_write_response_reproduces_every_capture(name: str) -> None:
    body = fixture(f"{name}.response.json")
    out = DIALECT.write_response(DIALECT.read_response(body), "m", IrRequest())
    assert out["output"] == body["output"]
    assert out["stopReason"] == body["stopReason"]
    u = body["usage"]
    for key in ("inputTokens", "outputTokens", "totalTokens"):
        assert out["usage"][key] == u[key]
    assert out["usage"].get("cacheWriteInputTokens", 0) == u.get("cacheWriteInputTokens", 0)
    assert set(out) == {"output", "stopReason", "usage", "metrics"}


# ---------------------------------------------------------------- C047: all nine stop reasons

C047 = [
    # bedrock, openai, anthropic, gemini
    ("end_turn", "stop", "end_turn", "STOP"),
    ("tool_use", "tool_calls", "tool_use", "STOP"),
    ("max_tokens", "length", "max_tokens", "MAX_TOKENS"),
    ("stop_sequence", "stop", "stop_sequence", "STOP"),
    ("guardrail_intervened", "content_filter", "refusal", "SAFETY"),
    ("content_filtered", "content_filter", "refusal", "SAFETY"),
    ("model_context_window_exceeded", "length", "max_tokens", "MAX_TOKENS"),
    ("some_future_value", "stop", "end_turn", "STOP"),
]


def converse(stop: str, text: str = "Sorry, I can't help with that.") -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7},
        "metrics": {"latencyMs": 1},
    }


@pytest.mark.parametrize(("bedrock", "openai", "anthropic", "gemini"), C047)
def test_c047_stop_reasons_map_to_every_client_and_the_text_is_kept(
    bedrock: str, openai: str, anthropic: str, gemini: str
) -> None:
    r = DIALECT.read_response(converse(bedrock))
    assert OPENAI.write_response(r, "p", IrRequest())["choices"][0]["finish_reason"] == openai
    assert ANTHROPIC.write_response(r, "p", IrRequest())["stop_reason"] == anthropic
    g = GEMINI.write_response(r, "p", IrRequest())["candidates"][0]
    assert g["finishReason"] == gemini
    assert g["content"]["parts"] == [{"text": "Sorry, I can't help with that."}]


@pytest.mark.parametrize("stop", ["malformed_model_output", "malformed_tool_use"])
def test_c047_malformed_outputs_are_failures_not_answers(stop: str) -> None:
    assert DIALECT.read_response(converse(stop)).stop_reason is StopReason.ERROR


@pytest.mark.parametrize(
    ("ir", "wire"),
    [
        (StopReason.END_TURN, "end_turn"),
        (StopReason.STOP_SEQUENCE, "stop_sequence"),
        (StopReason.MAX_TOKENS, "max_tokens"),
        (StopReason.TOOL_USE, "tool_use"),
        (StopReason.SAFETY, "content_filtered"),
        (StopReason.REFUSAL, "content_filtered"),
        (StopReason.PAUSE_TURN, "end_turn"),
        (StopReason.ERROR, "end_turn"),
        (StopReason.OTHER, "end_turn"),
        (None, "end_turn"),
    ],
)
def test_every_ir_stop_reason_has_a_valid_bedrock_value(ir: StopReason | None, wire: str) -> None:
    assert DIALECT.write_response(IrResponse(stop_reason=ir), "m", IrRequest())["stopReason"] == wire


def test_write_response_from_anthropic_with_thinking_and_tools() -> None:
    r = ANTHROPIC.read_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "S"},
                {"type": "redacted_thinking", "data": "R"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 6, "cache_read_input_tokens": 7},
        }
    )
    out = DIALECT.write_response(r, "m", IrRequest())
    assert out == {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "S"}}},
                    {"reasoningContent": {"redactedContent": "R"}},
                    {"toolUse": {"toolUseId": "toolu_1", "name": "f", "input": {"a": 1}}},
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 5, "outputTokens": 6, "totalTokens": 18, "cacheReadInputTokens": 7},
        "metrics": {"latencyMs": 0},
    }


# ---------------------------------------------------------------- errors

ERRORS = [
    # kind, status in, status out, exception
    (ErrorKind.INVALID_REQUEST, 400, 400, "ValidationException"),
    (ErrorKind.AUTHENTICATION, 401, 403, "AccessDeniedException"),
    (ErrorKind.PERMISSION, 403, 403, "AccessDeniedException"),
    (ErrorKind.NOT_FOUND, 404, 404, "ResourceNotFoundException"),
    (ErrorKind.REQUEST_TOO_LARGE, 413, 413, "ValidationException"),
    (ErrorKind.RATE_LIMIT, 429, 429, "ThrottlingException"),
    (ErrorKind.API_ERROR, 500, 500, "InternalServerException"),
    (ErrorKind.API_ERROR, 502, 502, "InternalServerException"),
    (ErrorKind.OVERLOADED, 503, 503, "ServiceUnavailableException"),
    (ErrorKind.TIMEOUT, 504, 408, "ModelTimeoutException"),
    ("insufficient_quota", 429, 400, "ServiceQuotaExceededException"),
    ("model_not_found", 404, 400, "ValidationException"),
]


@pytest.mark.parametrize(("kind", "status", "out", "name"), ERRORS)
def test_error_response_is_bedrock_native(kind: str, status: int, out: int, name: str) -> None:
    st, headers, body = DIALECT.error_response(status, kind, "boom")
    assert st == out
    assert orjson.loads(body) == {"message": "boom"}
    assert headers["content-type"] == "application/json"
    assert headers["x-amzn-errortype"] == f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    assert uuid.UUID(headers["x-amzn-requestid"])
    assert "content-length" not in headers and "transfer-encoding" not in headers  # C052


def test_read_error_captures_with_and_without_the_header() -> None:
    body = raw("error-400-validation-invalid-model.response.json")
    assert DIALECT.read_error(400, body) == UpstreamErrorInfo(
        None, "The provided model identifier is invalid.", None
    )
    hdr = {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    assert DIALECT.read_error(400, body, hdr) == UpstreamErrorInfo(
        "ValidationException", "The provided model identifier is invalid.", "ValidationException"
    )
    throttled = raw("error-429-throttling.response.json")
    assert len(throttled) == 65
    info = DIALECT.read_error(
        429,
        throttled,
        {"x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
    )
    assert info == UpstreamErrorInfo(
        "ThrottlingException", "Too many requests, please wait before trying again.", "ThrottlingException"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'{"__type":"com.amazon.bedrock#ServiceQuotaExceededException","message":"quota"}',
            UpstreamErrorInfo("ServiceQuotaExceededException", "quota", "ServiceQuotaExceededException"),
        ),
        (b'{"Message":"capital M"}', UpstreamErrorInfo(None, "capital M", None)),
        (b"<html>502 Bad Gateway</html>", UpstreamErrorInfo(None, "<html>502 Bad Gateway</html>")),
        (b"", UpstreamErrorInfo(None, "upstream returned HTTP 500")),
        (b'{"message":"cut sho', UpstreamErrorInfo(None, "cut sho")),
    ],
)
def test_read_error_tolerates_other_shapes(body: bytes, expected: UpstreamErrorInfo) -> None:
    assert DIALECT.read_error(500, body) == expected


def test_c020_bedrock_validation_error_is_rewrapped_for_each_client() -> None:
    info = DIALECT.read_error(
        400,
        b'{"message":"model does not support this operation"}',
        {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
    )
    kind = ErrorKind.from_status(400)
    _, _, body = ANTHROPIC.error_response(400, kind, info.message)
    assert orjson.loads(body) == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "model does not support this operation"},
    }
    _, _, body = OPENAI.error_response(400, kind, info.message)
    assert orjson.loads(body) == {
        "error": {
            "message": "model does not support this operation",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    st, _, body = GEMINI.error_response(400, kind, info.message)
    assert st == 400
    assert orjson.loads(body) == {
        "error": {
            "code": 400,
            "message": "model does not support this operation",
            "status": "INVALID_ARGUMENT",
        }
    }


def test_c018_throttling_stays_429_for_openai_and_anthropic_clients() -> None:
    info = DIALECT.read_error(
        429, b'{"message":"Too many requests"}', {"x-amzn-errortype": "ThrottlingException"}
    )
    assert info.code == "ThrottlingException"
    kind = ErrorKind.from_status(429)
    st, _, body = OPENAI.error_response(429, kind, info.message)
    assert st == 429 and orjson.loads(body)["error"]["code"] == "rate_limit_exceeded"
    st, _, body = ANTHROPIC.error_response(429, kind, info.message)
    assert st == 429 and orjson.loads(body)["error"]["type"] == "rate_limit_error"
