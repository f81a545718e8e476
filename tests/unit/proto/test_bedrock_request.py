"""Bedrock Converse requests: reading the captures, writing from the IR, names/ids, SigV4 egress (C033)."""

from __future__ import annotations

import datetime
import json
import re
from types import SimpleNamespace
from typing import Any

import botocore.auth  # type: ignore[import-untyped]
import pytest
from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]
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
from busbar.proto.bedrock import DIALECT, names, sigv4
from busbar.proto.bedrock.request_writer import document_name
from busbar.proto.errors import BadRequest
from busbar.proto.openai import DIALECT as OPENAI
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES
BEDROCK_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / "bedrock" / name).read_text())


def strip_empty(body: dict[str, Any]) -> dict[str, Any]:
    """The body without empty top-level objects/lists (a writer never emits them, case C011)."""
    return {k: v for k, v in body.items() if v != {} and v != []}


# ---------------------------------------------------------------- reading the captures


def test_read_converse_text_capture() -> None:
    ir = DIALECT.read_request(fixture("converse-text.request.json"))
    assert ir.model is None and ir.stream is False
    assert [(m.role, m.content) for m in ir.messages] == [
        ("user", [TextBlock("Tell me a joke about opentelemetry")])
    ]
    assert ir.system == [TextBlock("You are an app that knows about everything.")]
    assert ir.temperature == 0.5
    assert ir.max_tokens is None and ir.top_p is None and ir.stop == []
    assert ir.extra == {} and ir.tools == [] and ir.reasoning is None


def test_read_tool_use_capture() -> None:
    body = fixture("converse-tool-use.request.json")
    ir = DIALECT.read_request(body)
    assert [t.name for t in ir.tools] == ["temperature", "final_result"]
    assert (ir.tools[0].description or "").startswith("<summary>Get the temperature")
    assert ir.tools[0].input_schema == body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]
    assert ir.tools[1].input_schema["required"] == ["temperature", "date", "city"]
    assert ir.tool_choice == ToolChoice("required")
    assert ir.system == [TextBlock("You are a helpful chatbot.")]


def test_read_image_capture_keeps_the_bytes() -> None:
    body = fixture("converse-image.request.json")
    ir = DIALECT.read_request(body)
    text, image = ir.messages[0].content
    assert text == TextBlock("What is this vegetable?")
    assert isinstance(image, ImageBlock)
    assert (image.source, image.media_type) == ("base64", "image/jpeg")
    assert image.data == body["messages"][0]["content"][1]["image"]["source"]["bytes"]


def test_read_cache_points_document_and_system() -> None:
    ir = DIALECT.read_request(fixture("converse-prompt-cache-write.request.json"))
    blocks = ir.messages[0].content
    assert [type(b).__name__ for b in blocks] == ["TextBlock", "DocumentBlock", "TextBlock", "TextBlock"]
    doc = blocks[1]
    assert isinstance(doc, DocumentBlock)
    assert (doc.media_type, doc.name, doc.data) == (
        "text/plain",
        "Document 1",
        "WW91IGFyZSBhIGdyZWF0IG1hdGhlbWF0aWNpYW4=",
    )
    assert [b.cache_control for b in blocks] == [None, None, {"type": "ephemeral"}, {"type": "ephemeral"}]
    assert blocks[3] == TextBlock("What is 10 + 11?", {"type": "ephemeral"})
    assert isinstance(ir.system[0], TextBlock)
    assert ir.system[0].text.startswith("YOU MUST RESPONSE ONLY WITH SINGLE NUMBER")


def test_read_reasoning_capture() -> None:
    ir = DIALECT.read_request(fixture("converse-reasoning.request.json"))
    assert ir.reasoning == ReasoningAsk(budget_tokens=1024)
    assert ir.system == [] and ir.extra == {}


@pytest.mark.parametrize(
    "name",
    [
        "converse-text",
        "converse-stream-text",
        "converse-tool-use",
        "converse-image",
        "converse-prompt-cache-write",
        "converse-reasoning",
    ],
)
def test_every_capture_round_trips_through_the_ir(name: str) -> None:
    body = fixture(f"{name}.request.json")
    out = DIALECT.write_request(DIALECT.read_request(body), "m", prompt_caching=True)
    assert out == strip_empty(body)


def test_unmodelled_fields_stay_in_extra_for_a_same_protocol_hop() -> None:
    body = {
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "guardrailConfig": {"guardrailIdentifier": "g1", "guardrailVersion": "1"},
        "additionalModelRequestFields": {"top_k": 40, "anthropic_beta": ["x"]},
        "performanceConfig": {"latency": "optimized"},
    }
    ir = DIALECT.read_request(body)
    assert ir.top_k == 40
    assert ir.extra == {
        "guardrailConfig": {"guardrailIdentifier": "g1", "guardrailVersion": "1"},
        "additionalModelRequestFields": {"anthropic_beta": ["x"]},
        "performanceConfig": {"latency": "optimized"},
    }
    assert DIALECT.write_request(ir, "m") == body


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"video": {"format": "mp4"}}, "messages.0.content.0.video: not supported"),
        ({"image": {"format": "tiff", "source": {"bytes": "x"}}}, "image.format: 'tiff' is not one of"),
        ({"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/k"}}}}, "only inline bytes"),
    ],
)
def test_blocks_the_ir_cannot_carry_are_refused_naming_the_path(block: dict, message: str) -> None:
    with pytest.raises(BadRequest, match=re.escape(message)):
        DIALECT.read_request({"messages": [{"role": "user", "content": [block]}]})


def test_tool_result_reads_json_and_status_and_fills_the_name() -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"text": "go"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {"a": 1}}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "t1",
                            "content": [{"json": {"ok": True}}],
                            "status": "error",
                        }
                    }
                ],
            },
        ]
    }
    ir = DIALECT.read_request(body)
    assert ir.messages[1].content == [ToolUseBlock("t1", "f", {"a": 1})]
    assert ir.messages[2].content == [ToolResultBlock("t1", [TextBlock('{"ok":true}')], True, name="f")]


# ---------------------------------------------------------------- writing from other protocols


def oa(messages: list[dict], **kw: Any) -> IrRequest:
    return OPENAI.read_request({"model": "pool", "messages": messages, **kw})


def test_minimal_request_has_no_empty_collections_and_no_invented_max_tokens() -> None:
    body = DIALECT.write_request(oa([{"role": "user", "content": "hi"}]), "m")
    assert body == {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}


def test_knobs_tools_and_choice_from_openai() -> None:
    tools = [
        {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    ]
    ir = oa(
        [{"role": "system", "content": "be nice"}, {"role": "user", "content": "x"}],
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "f"}},
        max_tokens=50,
        temperature=0.2,
        top_p=0.9,
        stop=["END"],
        seed=3,
        user="u1",
        parallel_tool_calls=False,
    )
    body = DIALECT.write_request(ir, "m")
    assert body == {
        "messages": [{"role": "user", "content": [{"text": "x"}]}],
        "system": [{"text": "be nice"}],
        "inferenceConfig": {"maxTokens": 50, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]},
        "toolConfig": {
            "tools": [
                {"toolSpec": {"name": "f", "description": "d", "inputSchema": {"json": {"type": "object"}}}}
            ],
            "toolChoice": {"tool": {"name": "f"}},
        },
    }
    assert ir.dropped == ["seed", "user", "parallel_tool_calls"]


def test_tool_choice_none_keeps_tools_and_history_tools_get_a_spec() -> None:
    ir = IrRequest(
        messages=[
            IrMessage("user", [TextBlock("q")]),
            IrMessage("assistant", [ToolUseBlock("t1", "lookup", {})]),
            IrMessage("user", [ToolResultBlock("t1", [TextBlock("r")], name="lookup")]),
        ],
        tools=[IrTool("other")],
        tool_choice=ToolChoice("none"),
    )
    body = DIALECT.write_request(ir, "m")
    assert body["toolConfig"] == {
        "tools": [
            {"toolSpec": {"name": "other", "inputSchema": {"json": {"type": "object", "properties": {}}}}},
            {"toolSpec": {"name": "lookup", "inputSchema": {"json": {"type": "object", "properties": {}}}}},
        ]
    }
    assert ir.dropped == ["tool_choice"]
    assert body["messages"][2]["content"] == [{"toolResult": {"toolUseId": "t1", "content": [{"text": "r"}]}}]


def test_c040_pdf_reaches_bedrock_as_a_named_document_and_audio_is_refused() -> None:
    pdf = {
        "type": "file",
        "file": {"filename": "invoice.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
    }
    body = DIALECT.write_request(
        oa([{"role": "user", "content": [{"type": "text", "text": "total?"}, pdf]}]), "m"
    )
    assert body["messages"][0]["content"] == [
        {"text": "total?"},
        {"document": {"format": "pdf", "name": "invoice", "source": {"bytes": "JVBERi0x"}}},
    ]
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    with pytest.raises(BadRequest, match=r"audio part \(audio/wav\) cannot be sent to a Bedrock upstream"):
        DIALECT.write_request(oa([{"role": "user", "content": [audio]}]), "m")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("invoice.pdf", "invoice"),
        ("Q3 report (final).v2.docx", "Q3 report (final)-v2"),
        (None, "document-1"),
        ("...", "document-1"),
        ("a  b\tc.txt", "a b c"),
    ],
)
def test_document_names_meet_bedrock_rules(name: str | None, expected: str) -> None:
    out = document_name(name, 1)
    assert out == expected
    assert re.fullmatch(r"[A-Za-z0-9\-()\[\] ]+", out) and "  " not in out


def test_cache_breakpoints_need_the_lane_flag() -> None:
    ir = ANTHROPIC.read_request(
        {
            "model": "c",
            "max_tokens": 10,
            "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "U", "cache_control": {"type": "ephemeral"}}],
                }
            ],
        }
    )
    off = DIALECT.write_request(ir, "m")
    assert off["system"] == [{"text": "S"}] and off["messages"][0]["content"] == [{"text": "U"}]
    assert ir.dropped == ["cache_control"]
    on = DIALECT.write_request(ir, "m", prompt_caching=True)
    assert on["system"] == [{"text": "S"}, {"cachePoint": {"type": "default"}}]
    assert on["messages"][0]["content"] == [{"text": "U"}, {"cachePoint": {"type": "default"}}]


def test_reasoning_goes_to_claude_thinking_and_drops_temperature() -> None:
    ir = oa([{"role": "user", "content": "x"}], reasoning_effort="high", temperature=0.3, max_tokens=20000)
    ir.top_k = 5
    body = DIALECT.write_request(ir, "m")
    assert body["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 16384}}
    assert body["inferenceConfig"] == {"maxTokens": 20000}
    assert ir.dropped == ["temperature", "top_k"]
    plain = oa([{"role": "user", "content": "x"}])
    plain.top_k = 7
    assert DIALECT.write_request(plain, "m")["additionalModelRequestFields"] == {"top_k": 7}


def test_thinking_history_keeps_signatures_and_drops_unsigned() -> None:
    ir = IrRequest(
        messages=[
            IrMessage("user", [TextBlock("q")]),
            IrMessage(
                "assistant",
                [
                    ThinkingBlock("t", "SIG1"),
                    ThinkingBlock(redacted=True, data="RED"),
                    ThinkingBlock("x"),
                    TextBlock("a"),
                ],
            ),
        ]
    )
    body = DIALECT.write_request(ir, "m")
    assert body["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "t", "signature": "SIG1"}}},
        {"reasoningContent": {"redactedContent": "RED"}},
        {"text": "a"},
    ]
    assert ir.dropped == ["thinking (unsigned)"]


def test_non_object_tool_arguments_are_a_400_naming_the_call() -> None:
    ir = oa(
        [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":'}}
                ],
            },
        ]
    )
    with pytest.raises(BadRequest, match=r"tool call 'c1' \(f\): arguments must be a JSON object"):
        DIALECT.write_request(ir, "m")


def test_images_by_url_need_s3() -> None:
    ir = IrRequest(messages=[IrMessage("user", [ImageBlock("url", url="s3://bkt/cat.png")])])
    assert DIALECT.write_request(ir, "m")["messages"][0]["content"] == [
        {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://bkt/cat.png"}}}}
    ]
    ir = IrRequest(messages=[IrMessage("user", [ImageBlock("url", url="https://x/cat.png")])])
    with pytest.raises(BadRequest, match="image part given by URL cannot be sent to a Bedrock upstream"):
        DIALECT.write_request(ir, "m")


# ---------------------------------------------------------------- C048: ids and names


def c048_history() -> tuple[IrRequest, str, str]:
    long_id = "call_Q1w2E3|fc_" + "0123456789abcdef" * 4 + "0123456789abcde"  # 94 characters
    sig_id = "call_gm_AAAAAAAAAAAAAAAAAAAAAA__thought__" + "QUJD" * 75 + "."
    assert len(long_id) == 94
    ir = oa(
        [
            {"role": "user", "content": "read"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": long_id,
                        "type": "function",
                        "function": {"name": "mcp.files/read", "arguments": "{}"},
                    },
                    {
                        "id": sig_id,
                        "type": "function",
                        "function": {"name": "mcp_files_read", "arguments": "{}"},
                    },
                    {
                        "id": "call_ok-1",
                        "type": "function",
                        "function": {"name": "mcp_files_read", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": long_id, "content": "a"},
            {"role": "tool", "tool_call_id": sig_id, "content": "b"},
            {"role": "tool", "tool_call_id": "call_ok-1", "content": "c"},
        ],
        tools=[
            {"type": "function", "function": {"name": "mcp.files/read", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "mcp_files_read", "parameters": {"type": "object"}}},
        ],
    )
    return ir, long_id, sig_id


def test_c048_ids_and_names_fit_bedrock_and_calls_match_results() -> None:
    ir, _long_id, _sig_id = c048_history()
    body = DIALECT.write_request(ir, "m")
    calls = [b["toolUse"] for b in body["messages"][1]["content"]]
    results = [b["toolResult"] for b in body["messages"][2]["content"]]
    for c, r in zip(calls, results):
        assert BEDROCK_ID.fullmatch(c["toolUseId"]) and c["toolUseId"] == r["toolUseId"]
    assert calls[2]["toolUseId"] == "call_ok-1"  # an id that already fits is sent byte for byte
    names_sent = [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]]
    assert names_sent[1] == "mcp_files_read" and names_sent[0] != "mcp_files_read"
    assert all(BEDROCK_ID.fullmatch(n) for n in names_sent)
    assert calls[0]["name"] == names_sent[0]
    # the same history gives the same aliases (replicas and restarts re-derive them)
    again = DIALECT.write_request(c048_history()[0], "m")
    assert again == body
    # the model calls the renamed tool: the client sees its own name
    resp = DIALECT.read_response(
        {
            "output": {
                "message": {
                    "role": "assistant",
                    "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": names_sent[0], "input": {}}}],
                }
            },
            "stopReason": "tool_use",
            "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        }
    )
    assert resp.content == [ToolUseBlock("tooluse_1", "mcp.files/read", {})]


def test_c048_a_thousand_ids_sharing_64_characters_get_distinct_aliases() -> None:
    head = "x" * 64
    aliases = {names.alias(f"{head}|{i}") for i in range(1000)}
    assert len(aliases) == 1000
    assert all(BEDROCK_ID.fullmatch(a) for a in aliases)
    assert names.alias("fits_already-1") == "fits_already-1"


# ---------------------------------------------------------------- egress: URL, headers, SigV4 (C033)


def provider(
    base: str = "https://bedrock-runtime.eu-west-1.amazonaws.com", key: str = "AKIDEXAMPLE:SECRET"
) -> Any:
    return SimpleNamespace(base_url=base, path=None, path_base=None, api_key=key, auth=None)


def signed_headers(authorization: str) -> list[str]:
    m = re.search(r"SignedHeaders=([^,]+)", authorization)
    assert m is not None
    return m.group(1).split(";")


FROZEN = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: FROZEN.replace(tzinfo=None))


class _Captured(Exception):
    pass


def boto3_request(model_id: str, stream: bool = True) -> dict[str, Any]:
    """What boto3 itself sends for the same call (captured before the network)."""
    boto3 = pytest.importorskip(
        "boto3",
        reason="boto3 is a test dependency (pip install boto3): the official Bedrock SDK must parse our output",
    )
    client = boto3.client(
        "bedrock-runtime",
        region_name="eu-west-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="SECRET",
    )
    seen: dict[str, Any] = {}

    def before_send(request: Any, **_: Any) -> None:
        hdrs = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        seen.update(url=request.url, headers=hdrs, body=request.body)
        raise _Captured

    client.meta.events.register("before-send.bedrock-runtime.*", before_send)
    call = client.converse_stream if stream else client.converse
    with pytest.raises(_Captured):
        call(modelId=model_id, messages=[{"role": "user", "content": [{"text": "hi"}]}])
    return seen


@pytest.mark.parametrize(
    ("model_id", "path"),
    [
        ("eu.amazon.nova-micro-v1:0", "/model/eu.amazon.nova-micro-v1%3A0/converse-stream"),
        (
            "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-5-sonnet-20240620-v1:0",
            (
                "/model/arn%3Aaws%3Abedrock%3Aeu-west-1%3A123456789012%3Ainference-profile%2F"
                "eu.anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
            ),
        ),
    ],
)
def test_c033_path_is_encoded_once_on_the_wire_twice_in_the_canonical_request(
    frozen_clock: None, model_id: str, path: str
) -> None:
    theirs = boto3_request(model_id)
    body = theirs["body"]
    url, headers, sent = DIALECT.egress_request(provider(), model_id, True, body, None)
    assert url == "https://bedrock-runtime.eu-west-1.amazonaws.com" + path
    assert url == theirs["url"]
    assert sent is body
    # canonical URI: each segment encoded once more (non-S3 services)
    req = AWSRequest(method="POST", url=url, data=body, headers={"content-type": "application/json"})
    req.context["timestamp"] = FROZEN.strftime("%Y%m%dT%H%M%SZ")
    canonical = SigV4Auth(Credentials("AKIDEXAMPLE", "SECRET"), "bedrock", "eu-west-1").canonical_request(req)
    assert canonical.splitlines()[1] == path.replace("%", "%25")
    # our signed header set: host once, no user-agent
    signed = signed_headers(headers["authorization"])
    assert signed.count("host") == 1 and "user-agent" not in signed
    assert headers["x-amz-date"] == "20260102T030405Z"
    assert "Credential=AKIDEXAMPLE/20260102/eu-west-1/bedrock/aws4_request" in headers["authorization"]
    # byte for byte against botocore's own client for the same headers
    their_auth = theirs["headers"]["authorization"]
    their_signed = signed_headers(their_auth)
    same = {
        k: v for k, v in theirs["headers"].items() if k in their_signed and k not in ("host", "x-amz-date")
    }
    mine = sigv4.sign(url, body, same, "AKIDEXAMPLE:SECRET")
    assert mine["authorization"] == their_auth


def test_egress_non_stream_url_session_token_and_headers(frozen_clock: None) -> None:
    url, headers, _ = DIALECT.egress_request(
        provider("https://bedrock-runtime.us-west-2.amazonaws.com", "AK:SK:TOKEN"),
        "anthropic.claude-v2",
        False,
        b"{}",
        None,
    )
    assert url == "https://bedrock-runtime.us-west-2.amazonaws.com/model/anthropic.claude-v2/converse"
    assert headers["x-amz-security-token"] == "TOKEN"
    assert "/us-west-2/bedrock/aws4_request" in headers["authorization"]
    assert "x-amz-security-token" in headers["authorization"]
    assert headers["content-type"] == "application/json" and headers["accept-encoding"] == "identity"
    assert headers["accept"] == "application/json"
    assert headers["user-agent"].startswith("Boto3/")
    for h in ("content-length", "transfer-encoding", "connection"):  # C052: no framing headers of ours
        assert h not in headers


def test_egress_with_kernel_auth_headers_skips_sigv4() -> None:
    _, headers, _ = DIALECT.egress_request(
        provider(key="ignored"), "m", True, b"{}", {"authorization": "Bearer BK"}
    )
    assert headers["authorization"] == "Bearer BK" and "x-amz-date" not in headers
    assert headers["accept"] == "application/vnd.amazon.eventstream"


@pytest.mark.parametrize(
    ("url", "region"),
    [
        ("https://bedrock-runtime.us-east-1.amazonaws.com", "us-east-1"),
        ("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
        ("https://vpce-0abc.bedrock-runtime.ap-southeast-2.vpce.amazonaws.com", "ap-southeast-2"),
        ("https://bedrock-runtime.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("http://127.0.0.1:9100/mock", "us-east-1"),
    ],
)
def test_region_is_parsed_from_the_host(url: str, region: str) -> None:
    assert sigv4.region_of(url) == region


@pytest.mark.parametrize("key", ["", "onlyone", ":secret", "access:"])
def test_malformed_credentials_are_refused_without_echoing_them(key: str) -> None:
    with pytest.raises(sigv4.CredentialFormatError) as e:
        DIALECT.egress_request(provider(key=key), "m", False, b"{}", None)
    assert "ACCESS_KEY_ID:SECRET_ACCESS_KEY" in str(e.value)
    if key:
        assert key not in str(e.value)


def test_provider_extra_headers_are_signed_too(frozen_clock: None) -> None:
    p = provider()
    p.extra_headers = {"x-amzn-bedrock-trace": "ENABLED"}
    _, headers, _ = DIALECT.egress_request(p, "m", False, b"{}", None)
    assert headers["x-amzn-bedrock-trace"] == "ENABLED"
    assert "x-amzn-bedrock-trace" in signed_headers(headers["authorization"])
