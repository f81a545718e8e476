"""Gemini requests: reading the captures, writing from the IR (C008, C011, C039, C040, C048), egress URLs."""

from __future__ import annotations

import base64
import json
import re
from types import SimpleNamespace
from typing import Any

import pytest
from busbar.ir.model import (
    DocumentBlock,
    ImageBlock,
    IrMessage,
    IrRequest,
    IrTool,
    ReasoningAsk,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.errors import BadRequest
from busbar.proto.gemini import DIALECT
from busbar.proto.openai import DIALECT as OPENAI
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / "gemini" / name).read_text())


def oa(messages: list[dict], **kw: Any) -> IrRequest:
    return OPENAI.read_request({"model": "pool", "messages": messages, **kw})


# ---------------------------------------------------------------- reading the captures


def test_read_text_basic_capture() -> None:
    ir = DIALECT.read_request(fixture("text-basic.request.json"))
    assert ir.model is None and ir.stream is False
    assert [(m.role, m.content) for m in ir.messages] == [("user", [TextBlock("Hello!")])]
    assert ir.system == [TextBlock("You are a chatbot.")]
    assert ir.extra == {"generationConfig": {"responseModalities": ["TEXT"]}}
    assert ir.max_tokens is None and ir.temperature is None and ir.tools == []


def test_read_text_stream_capture() -> None:
    ir = DIALECT.read_request(fixture("text-stream.request.json"))
    assert ir.temperature == 0.0
    assert ir.system == [TextBlock("You are a helpful chatbot.")]
    assert ir.messages[0].content == [TextBlock("What is the capital of France?")]
    assert ir.extra == {}


def test_read_function_call_capture() -> None:
    body = fixture("function-call.request.json")
    ir = DIALECT.read_request(body)
    assert [t.name for t in ir.tools] == ["get_user_country", "final_result"]
    assert ir.tools[0] == IrTool("get_user_country", None, {"properties": {}, "type": "object"})
    assert ir.tools[1].description == "The final response which ends this conversation"
    assert ir.tools[1].input_schema == {
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "type": "object",
    }
    assert ir.tool_choice == ToolChoice("required")
    assert ir.extra == {"toolConfig": body["toolConfig"]}
    out = DIALECT.write_request(ir, "gemini-2.0-flash")
    assert out["toolConfig"] == body["toolConfig"]  # a same-protocol hop keeps the allowed names
    assert "generationConfig" not in out  # the capture's empty {} is not re-emitted (C011)


def test_read_cached_content_capture() -> None:
    ir = DIALECT.read_request(fixture("cached-content.request.json"))
    assert ir.extra == {
        "cachedContent": "cachedContents/7lf5him5ev4iemi1yjv2gwli5bhpz3yidzejwllo",
        "generationConfig": {"responseModalities": ["TEXT"]},
    }
    assert DIALECT.write_request(ir, "m") == fixture("cached-content.request.json")


def test_read_inline_image_converts_base64url_to_the_standard_alphabet() -> None:
    body = fixture("image-inline-data.request.json")
    sent = body["contents"][0]["parts"][1]["inlineData"]["data"]
    ir = DIALECT.read_request(body)
    text, image = ir.messages[0].content
    assert text == TextBlock("What is this vegetable?")
    assert isinstance(image, ImageBlock) and (image.source, image.media_type) == ("base64", "image/jpeg")
    assert image.data is not None and "-" not in image.data and "_" not in image.data
    assert base64.b64decode(image.data) == base64.urlsafe_b64decode(sent + "=" * (-len(sent) % 4))
    assert image.data.startswith("/9j/4AAQSkZJRgABAQEBLAEsAAD/4QBW")


def test_read_thinking_stream_capture() -> None:
    ir = DIALECT.read_request(fixture("thinking-stream.request.json"))
    assert ir.reasoning == ReasoningAsk(include_thoughts=True)
    assert ir.tools == [IrTool("dummy", None, {"properties": {}, "type": "object"})]
    assert DIALECT.write_request(ir, "m")["generationConfig"] == {"thinkingConfig": {"includeThoughts": True}}


def test_read_thought_signature_followup_and_write_it_back_exactly() -> None:
    body = fixture("function-response-thought-signature-followup.request.json")
    ir = DIALECT.read_request(body)
    call_part = body["contents"][1]["parts"][0]
    assert ir.messages[1].content == [
        ToolUseBlock(
            "pyd_ai_29bf73b69e02448588e15893d47a3e7e",
            "get_country",
            {},
            thought_signature=call_part["thoughtSignature"].replace("-", "+").replace("_", "/"),
        )
    ]
    assert ir.messages[2].content == [
        ToolResultBlock(
            "pyd_ai_29bf73b69e02448588e15893d47a3e7e",
            [TextBlock('{"return_value":"Mexico"}')],
            name="get_country",
        )
    ]
    assert ir.tools[0].input_schema == {"additionalProperties": False, "properties": {}, "type": "object"}
    out = DIALECT.write_request(ir, "gemini-3-pro-preview")
    [part] = out["contents"][1]["parts"]
    assert part["functionCall"] == {
        "name": "get_country",
        "args": {},
        "id": "pyd_ai_29bf73b69e02448588e15893d47a3e7e",
    }
    # the SDK sent the signature base64url; the same bytes go back in the standard alphabet
    assert base64.b64decode(part["thoughtSignature"]) == base64.urlsafe_b64decode(
        call_part["thoughtSignature"]
    )
    assert "-" not in part["thoughtSignature"] and "_" not in part["thoughtSignature"]
    assert out["contents"][2]["parts"] == body["contents"][2]["parts"]
    assert out["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_country",
                    "parametersJsonSchema": {
                        "additionalProperties": False,
                        "properties": {},
                        "type": "object",
                    },
                }
            ]
        }
    ]


def test_snake_case_spellings_and_function_responses_without_ids() -> None:
    body = {
        "system_instruction": {"parts": [{"text": "sys"}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "go"},
                    {"inline_data": {"mime_type": "application/pdf", "data": "JVBERi0x"}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"function_call": {"name": "f", "args": {"a": 1}}},
                    {"function_call": {"name": "f", "args": {"a": 2}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"function_response": {"name": "f", "response": {"output": "one"}}},
                    {"function_response": {"name": "f", "response": {"error": "two"}}},
                ],
            },
        ],
        "generation_config": {
            "max_output_tokens": 9,
            "stop_sequences": ["x"],
            "top_k": 3,
            "thinking_config": {"thinking_budget": -1},
        },
    }
    ir = DIALECT.read_request(body)
    assert ir.system == [TextBlock("sys")]
    assert ir.messages[0].content[1] == DocumentBlock("application/pdf", data="JVBERi0x")
    calls = ir.messages[1].content
    assert [c.id for c in calls if isinstance(c, ToolUseBlock)] == ["call_gm_1_0", "call_gm_1_1"]
    assert ir.messages[2].content == [
        ToolResultBlock("call_gm_1_0", [TextBlock("one")], False, name="f"),
        ToolResultBlock("call_gm_1_1", [TextBlock("two")], True, name="f"),
    ]
    assert (ir.max_tokens, ir.stop, ir.top_k) == (9, ["x"], 3)
    assert ir.reasoning == ReasoningAsk(budget_tokens=-1)
    out = DIALECT.write_request(ir, "m")
    assert out["contents"][1]["parts"] == [
        {"functionCall": {"name": "f", "args": {"a": 1}}},
        {"functionCall": {"name": "f", "args": {"a": 2}}},
    ]
    assert out["contents"][2]["parts"] == [
        {"functionResponse": {"name": "f", "response": {"output": "one"}}},
        {"functionResponse": {"name": "f", "response": {"error": "two"}}},
    ]
    assert out["generationConfig"]["thinkingConfig"] == {"thinkingBudget": -1, "includeThoughts": True}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "contents: required"),
        (
            {"contents": [{"role": "system", "parts": []}]},
            "contents[0].role: 'system' is not one of user, model",
        ),
        (
            {"contents": [{"parts": [{"executableCode": {}}]}]},
            "contents[0].parts[0].executableCode: not supported",
        ),
        ({"contents": [], "tools": [{"googleSearch": {}}]}, "tools[0].googleSearch: not supported"),
        ({"contents": [{"parts": [{"fileData": {"fileUri": "gs://x"}}]}]}, "fileData.mimeType: required"),
    ],
)
def test_malformed_bodies_are_400s_naming_the_path(body: dict, message: str) -> None:
    with pytest.raises(BadRequest, match=re.escape(message)):
        DIALECT.read_request(body)


# ---------------------------------------------------------------- writing


def test_minimal_body_has_no_empty_collections() -> None:
    assert DIALECT.write_request(oa([{"role": "user", "content": "hi"}]), "m") == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}]
    }


def test_c008_max_tokens_becomes_max_output_tokens() -> None:
    body = DIALECT.write_request(
        oa([{"role": "user", "content": "Quail?"}], max_tokens=2), "gemini-2.5-flash"
    )
    assert body["generationConfig"] == {"maxOutputTokens": 2}


def test_sampling_knobs_tools_and_choice() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object", "properties": {"a": {"type": "string"}}},
            },
        }
    ]
    ir = oa(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "x"}],
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "f"}},
        temperature=0.1,
        top_p=0.8,
        stop=["END"],
        seed=7,
        presence_penalty=0.5,
        frequency_penalty=0.25,
        user="u",
        parallel_tool_calls=False,
        response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}},
    )
    body = DIALECT.write_request(ir, "m")
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "systemInstruction": {"parts": [{"text": "S"}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "f",
                        "description": "d",
                        "parametersJsonSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
                    }
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}},
        "generationConfig": {
            "temperature": 0.1,
            "topP": 0.8,
            "stopSequences": ["END"],
            "seed": 7,
            "presencePenalty": 0.5,
            "frequencyPenalty": 0.25,
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object"},
        },
    }
    assert ir.dropped == ["parallel_tool_calls", "user"]


@pytest.mark.parametrize(("choice", "mode"), [("auto", "AUTO"), ("required", "ANY"), ("none", "NONE")])
def test_tool_choice_modes(choice: str, mode: str) -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    body = DIALECT.write_request(oa([{"role": "user", "content": "x"}], tools=tools, tool_choice=choice), "m")
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


@pytest.mark.parametrize(
    ("ask", "config"),
    [
        (ReasoningAsk(effort="high"), {"thinkingBudget": 16384, "includeThoughts": True}),
        (ReasoningAsk(effort="minimal"), {"thinkingBudget": 1024, "includeThoughts": True}),
        (ReasoningAsk(effort="none"), {"thinkingBudget": 0}),
        (ReasoningAsk(budget_tokens=6000), {"thinkingBudget": 6000, "includeThoughts": True}),
        (
            ReasoningAsk(budget_tokens=-1, include_thoughts=False),
            {"thinkingBudget": -1, "includeThoughts": False},
        ),
    ],
)
def test_reasoning_asks_become_thinking_config(ask: ReasoningAsk, config: dict) -> None:
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("x")])], reasoning=ask)
    assert DIALECT.write_request(ir, "m")["generationConfig"] == {"thinkingConfig": config}


def test_anthropic_thinking_budget_reaches_gemini_verbatim() -> None:
    ir = ANTHROPIC.read_request(
        {
            "model": "c",
            "max_tokens": 9000,
            "thinking": {"type": "enabled", "budget_tokens": 6000},
            "messages": [{"role": "user", "content": "x"}],
        }
    )
    assert DIALECT.write_request(ir, "m")["generationConfig"] == {
        "maxOutputTokens": 9000,
        "thinkingConfig": {"thinkingBudget": 6000, "includeThoughts": True},
    }


def test_c039_tool_arguments_and_results_become_objects() -> None:
    calls = [("a", "{}"), ("b", ""), ("c", "null"), ("d", '{"count":3,"ratio":0.5}')]
    results = [("a", "12 degrees"), ("b", "[1,2]"), ("c", '{"temp":12}'), ("d", "")]
    ir = oa(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": "tool_" + i, "arguments": a}}
                    for i, a in calls
                ],
            },
            *[{"role": "tool", "tool_call_id": i, "content": c} for i, c in results],
        ]
    )
    body = DIALECT.write_request(ir, "m")
    model_parts = body["contents"][1]["parts"]
    assert [p["functionCall"]["args"] for p in model_parts] == [{}, {}, {}, {"count": 3, "ratio": 0.5}]
    assert [p["functionCall"]["id"] for p in model_parts] == ["a", "b", "c", "d"]
    responses = [p["functionResponse"] for p in body["contents"][2]["parts"]]
    assert [r["response"] for r in responses] == [
        {"output": "12 degrees"},
        {"output": "[1,2]"},
        {"temp": 12},
        {"output": ""},
    ]
    assert [(r["name"], r["id"]) for r in responses] == [
        ("tool_a", "a"),
        ("tool_b", "b"),
        ("tool_c", "c"),
        ("tool_d", "d"),
    ]


def test_c039_anthropic_error_result_uses_the_error_key() -> None:
    ir = ANTHROPIC.read_request(
        {
            "model": "c",
            "max_tokens": 5,
            "messages": [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "X"}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "is_error": True,
                            "content": "city not found",
                        }
                    ],
                },
            ],
        }
    )
    parts = DIALECT.write_request(ir, "m")["contents"][2]["parts"]
    assert parts == [
        {
            "functionResponse": {
                "name": "get_weather",
                "id": "toolu_1",
                "response": {"error": "city not found"},
            }
        }
    ]


def test_c039_unparsable_arguments_are_a_400_naming_the_call() -> None:
    ir = oa(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": '{"a":'}}
                ],
            },
        ]
    )
    with pytest.raises(
        BadRequest, match=r"tool call 'call_9' \(f\): arguments must be a JSON object for a Gemini upstream"
    ):
        DIALECT.write_request(ir, "m")


def test_tool_result_without_a_known_function_name_is_a_400() -> None:
    ir = IrRequest(messages=[IrMessage("user", [ToolResultBlock("orphan", [TextBlock("x")])])])
    with pytest.raises(BadRequest, match="tool result 'orphan': the function name is unknown"):
        DIALECT.write_request(ir, "m")


def test_c040_pdf_and_audio_become_inline_data_with_their_mime_types() -> None:
    pdf = {
        "type": "file",
        "file": {"filename": "invoice.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
    }
    body = DIALECT.write_request(
        oa([{"role": "user", "content": [{"type": "text", "text": "total?"}, pdf]}]), "m"
    )
    assert body["contents"][0]["parts"] == [
        {"text": "total?"},
        {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0x"}},
    ]
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    body = DIALECT.write_request(oa([{"role": "user", "content": [audio]}]), "m")
    assert body["contents"][0]["parts"] == [{"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}}]


def test_images_by_data_and_by_url() -> None:
    ir = oa(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                ],
            }
        ]
    )
    assert DIALECT.write_request(ir, "m")["contents"][0]["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": "aW1n"}},
        {"fileData": {"fileUri": "https://example.com/cat.jpg"}},
    ]


def test_thinking_history_is_not_sent_and_is_named() -> None:
    ir = IrRequest(
        messages=[
            IrMessage("user", [TextBlock("q")]),
            IrMessage("assistant", [ThinkingBlock("t", "SIG"), TextBlock("a")]),
        ]
    )
    assert DIALECT.write_request(ir, "m")["contents"][1] == {"role": "model", "parts": [{"text": "a"}]}
    assert ir.dropped == ["thinking"]


def test_c048_tool_names_gemini_rejects_get_aliases_that_map_back() -> None:
    tools = [
        {"type": "function", "function": {"name": "mcp.files/read"}},
        {"type": "function", "function": {"name": "mcp_files_read"}},
        {"type": "function", "function": {"name": "ns:ok.name-1"}},
    ]
    body = DIALECT.write_request(oa([{"role": "user", "content": "x"}], tools=tools), "m")
    sent = [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert sent[1:] == ["mcp_files_read", "ns:ok.name-1"]
    assert sent[0] != "mcp_files_read" and re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}", sent[0])
    resp = DIALECT.read_response(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"functionCall": {"name": sent[0], "args": {}}}]},
                    "finishReason": "STOP",
                }
            ]
        }
    )
    assert isinstance(resp.content[0], ToolUseBlock) and resp.content[0].name == "mcp.files/read"


def test_shim_keys_never_reach_the_upstream() -> None:
    ir = DIALECT.read_request({"contents": [{"parts": [{"text": "x"}]}], "__busbar_gemini_json_array": True})
    assert ir.extra == {"__busbar_gemini_json_array": True}
    assert DIALECT.write_request(ir, "m") == {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}


# ---------------------------------------------------------------- egress


def provider(**kw: Any) -> Any:
    base = {
        "base_url": "https://generativelanguage.googleapis.com",
        "path": None,
        "path_base": None,
        "api_key": "AIza-test",
        "auth": None,
    }
    return SimpleNamespace(**(base | kw))


def test_egress_urls_and_native_auth() -> None:
    url, headers, body = DIALECT.egress_request(provider(), "gemini-2.5-flash", False, b"{}", None)
    assert url == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    assert headers == {
        "content-type": "application/json",
        "accept": "application/json",
        "accept-encoding": "identity",
        "user-agent": "google-genai-sdk/0.8.0 gl-python/3.11",
        "x-goog-api-key": "AIza-test",
    }
    assert body == b"{}"
    url, headers, _ = DIALECT.egress_request(provider(), "gemini-2.5-flash", True, b"{}", None)
    assert url.endswith("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    assert headers["accept"] == "text/event-stream"


def test_egress_vertex_path_base_with_kernel_auth_headers() -> None:
    p = provider(
        base_url="https://us-central1-aiplatform.googleapis.com",
        path_base="/v1/projects/p1/locations/us-central1/publishers/google/models",
        auth="jwt-bearer",
    )
    url, headers, _ = DIALECT.egress_request(
        p, "gemini-2.5-pro", True, b"{}", {"authorization": "Bearer ya29.x"}
    )
    assert url == (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p1/locations/us-central1/publishers/"
        "google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert headers["authorization"] == "Bearer ya29.x" and "x-goog-api-key" not in headers


def test_provider_extra_headers_are_sent() -> None:
    _, headers, _ = DIALECT.egress_request(
        provider(extra_headers={"x-goog-user-project": "p1"}), "m", False, b"{}", None
    )
    assert headers["x-goog-user-project"] == "p1" and headers["x-goog-api-key"] == "AIza-test"
