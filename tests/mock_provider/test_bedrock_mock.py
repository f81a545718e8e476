"""The Bedrock Converse endpoints of the mock: boto3 against default replies, eventstream framing, SigV4, faults."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import botocore.exceptions  # type: ignore[import-untyped]
import httpx
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.eventstream import EventStreamBuffer  # type: ignore[import-untyped]
from busbar.ir.model import BlockDelta, IrMessage, IrRequest, StopReason, StreamError, TextBlock
from busbar.proto.bedrock import DIALECT as BEDROCK
from busbar_mock_provider.process import MockProcess

from .conftest import WEATHER_ARGS, WEATHER_SCHEMA, fixture_bytes

boto3 = pytest.importorskip(
    "boto3",
    reason="boto3 is a test dependency (pip install boto3): the official Bedrock SDK must parse our output",
)

MODEL = "us.amazon.nova-micro-v1:0"
MSGS: Any = [{"role": "user", "content": [{"text": "Tell me a joke"}]}]
TOOLS: Any = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER_SCHEMA}}}]}


@pytest.fixture
def brt(mock: MockProcess) -> Any:
    """boto3 bedrock-runtime pointed at the mock (SigV4 with test keys, no retries)."""
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=mock.url,
        region_name="us-east-1",
        aws_access_key_id="AKIDMOCK",
        aws_secret_access_key="secret",
        config=Config(retries={"total_max_attempts": 1}),
    )


def frames(raw: bytes) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    buf = EventStreamBuffer()
    buf.add_data(raw)
    return [(dict(m.headers), json.loads(m.payload)) for m in buf]


def decode(raw: bytes) -> list[Any]:
    dec = BEDROCK.stream_decoder()
    return dec.feed(raw) + dec.close()


def signed(mock: MockProcess, model: str = MODEL, stream: bool = False, body: Any = None) -> httpx.Response:
    """A SigV4-signed call built by the Bedrock dialect's own egress_request."""
    provider = SimpleNamespace(
        base_url=mock.url, path=None, path_base=None, api_key="AKIDMOCK:secret", auth=None
    )
    raw = json.dumps(body if body is not None else {"messages": MSGS}).encode()
    url, headers, content = BEDROCK.egress_request(provider, model, stream, raw, None)
    return httpx.post(url, headers=headers, content=content)


def test_converse_default_reply(mock: MockProcess, brt: Any) -> None:
    out = brt.converse(modelId=MODEL, messages=MSGS, system=[{"text": "be brief"}])
    assert out["output"]["message"] == {
        "role": "assistant",
        "content": [{"text": "Hello from us.amazon.nova-micro-v1:0. You said: Tell me a joke"}],
    }
    assert out["stopReason"] == "end_turn"
    assert (
        out["usage"]["outputTokens"] == 9 and out["usage"]["totalTokens"] == out["usage"]["inputTokens"] + 9
    )
    assert out["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"].count("-") == 4
    req = mock.requests()[-1]
    assert req["path"] == "/model/us.amazon.nova-micro-v1:0/converse"  # the log shows the decoded path
    assert req["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDMOCK/")
    raw = mock.client.post(
        "/model/m/converse",
        headers={"authorization": req["headers"]["authorization"]},
        json={"messages": MSGS},
    )
    assert (
        raw.content.startswith(b'{"metrics":{"latencyMs":')
        and b'"stopReason":"end_turn","usage":{' in raw.content
    )


def test_converse_stream_default_reply(mock: MockProcess, brt: Any) -> None:
    events = list(brt.converse_stream(modelId=MODEL, messages=MSGS)["stream"])
    assert events[0] == {"messageStart": {"role": "assistant"}}
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text == "Hello from us.amazon.nova-micro-v1:0. You said: Tell me a joke"
    assert [next(iter(e)) for e in events[-3:]] == ["contentBlockStop", "messageStop", "metadata"]
    assert events[-1]["metadata"]["usage"]["outputTokens"] == 9
    r = signed(mock, stream=True)
    assert (
        r.headers["content-type"] == "application/vnd.amazon.eventstream"
        and "content-length" not in r.headers
    )
    got = frames(r.content)
    assert got[0][0] == {
        ":event-type": "messageStart",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    assert list(got[1][1]) == ["contentBlockIndex", "delta", "p"]  # sorted keys with the padding field
    ours = decode(r.content)
    assert (
        "".join(e.value for e in ours if isinstance(e, BlockDelta))
        == "Hello from us.amazon.nova-micro-v1:0. You said: Tell me a joke"
    )
    assert ours[-2].stop_reason is StopReason.END_TURN and ours[-2].usage.output_tokens == 9


def test_tool_use_reply_both_ways(brt: Any) -> None:
    out = brt.converse(modelId=MODEL, messages=MSGS, toolConfig=TOOLS)
    tu = out["output"]["message"]["content"][0]["toolUse"]
    assert (
        tu["name"] == "get_weather" and tu["input"] == WEATHER_ARGS and tu["toolUseId"].startswith("tooluse_")
    )
    assert out["stopReason"] == "tool_use"
    events = list(brt.converse_stream(modelId=MODEL, messages=MSGS, toolConfig=TOOLS)["stream"])
    start = events[1]["contentBlockStart"]["start"]["toolUse"]
    assert start["name"] == "get_weather"
    args = "".join(
        e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events if "contentBlockDelta" in e
    )
    assert json.loads(args) == WEATHER_ARGS
    assert events[-2] == {"messageStop": {"stopReason": "tool_use"}}
    follow = MSGS + [
        {"role": "assistant", "content": [{"toolUse": tu}]},
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": tu["toolUseId"], "content": [{"json": {"t": 12}}]}}],
        },
    ]
    out = brt.converse(modelId=MODEL, messages=follow, toolConfig=TOOLS)
    assert out["output"]["message"]["content"][0]["text"].endswith('The tool returned: {"t":12}')


def test_max_tokens_and_stop_sequences(brt: Any) -> None:
    out = brt.converse(modelId=MODEL, messages=MSGS, inferenceConfig={"maxTokens": 2})
    assert (
        out["output"]["message"]["content"][0]["text"] == "Hello from" and out["stopReason"] == "max_tokens"
    )
    out = brt.converse(modelId=MODEL, messages=MSGS, inferenceConfig={"stopSequences": ["from"]})
    assert out["output"]["message"]["content"][0]["text"] == "Hello " and out["stopReason"] == "stop_sequence"


def test_sigv4_is_required_and_validation_is_bedrocks(mock: MockProcess) -> None:
    r = mock.client.post("/model/m/converse", json={"messages": MSGS})
    assert r.status_code == 403 and r.json() == {"message": "Missing Authentication Token"}
    assert r.headers["x-amzn-errortype"].startswith("MissingAuthenticationTokenException")
    r = mock.client.post(
        "/model/m/converse", headers={"authorization": "Bearer bedrock-api-key"}, json={"messages": []}
    )
    assert r.status_code == 400 and r.headers["x-amzn-errortype"].startswith("ValidationException:")
    r = signed(mock, body={"messages": [{"role": "assistant", "content": [{"text": "x"}]}]})
    assert r.status_code == 400 and r.json()["message"].startswith(
        "A conversation must start with a user message."
    )


@pytest.mark.parametrize(
    ("status", "exc", "capture"),
    [
        (429, "ThrottlingException", "bedrock/error-429-throttling.response.json"),
        (400, "ValidationException", "bedrock/error-400-validation-invalid-model.response.json"),
        (403, "AccessDeniedException", None),
        (500, "InternalServerException", None),
        (503, "ServiceUnavailableException", None),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_scripted_errors_raise_boto3_typed_exceptions(
    mock: MockProcess, brt: Any, status: int, exc: str, capture: str | None, stream: bool
) -> None:
    mock.script([{"match": {"protocol": "bedrock"}, "response": {"status": status}}])
    call = brt.converse_stream if stream else brt.converse
    with pytest.raises(getattr(brt.exceptions, exc)) as e:
        call(modelId=MODEL, messages=MSGS)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    if capture:
        mock.script([{"match": {"protocol": "bedrock"}, "response": {"status": status}}])
        r = signed(mock)
        assert r.content == fixture_bytes(capture)
        info = BEDROCK.read_error(status, r.content, r.headers)
        assert info.code == exc and info.message == json.loads(fixture_bytes(capture))["message"]


def test_c018_throttling_exception_frame_before_content(mock: MockProcess, brt: Any) -> None:
    mock.script(
        [
            {
                "match": {"protocol": "bedrock", "stream": True},
                "response": {
                    "error_after": 1,
                    "error": {"__type": "throttlingException", "message": "Too many requests"},
                },
            }
        ]
    )
    r = signed(mock, stream=True)
    got = frames(r.content)
    assert [h.get(":event-type") or h.get(":exception-type") for h, _ in got] == [
        "messageStart",
        "throttlingException",
    ]
    assert decode(r.content) == [StreamError("rate_limit", "Too many requests")]
    mock.script([{"match": {"protocol": "bedrock"}, "response": {"error_after": 3}}])
    with pytest.raises(botocore.exceptions.EventStreamError) as e:
        list(brt.converse_stream(modelId=MODEL, messages=MSGS)["stream"])
    assert e.value.response["Error"]["Code"] == "internalServerException"


def test_match_model_is_the_decoded_model_id_from_the_url(mock: MockProcess, brt: Any) -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20240620-v1:0"
    mock.script([{"match": {"protocol": "bedrock", "model": arn}, "response": {"text": "profile hit"}}])
    assert brt.converse(modelId=MODEL, messages=MSGS)["output"]["message"]["content"][0]["text"].startswith(
        "Hello"
    )
    out = brt.converse(modelId=arn, messages=MSGS)
    assert out["output"]["message"]["content"][0]["text"] == "profile hit"
    assert mock.requests()[-1]["path"] == f"/model/{arn}/converse"


def test_fixture_replay_and_scripted_events_in_boto3_shape(mock: MockProcess, brt: Any) -> None:
    mock.script(
        [
            {
                "match": {"protocol": "bedrock"},
                "response": {
                    "fixture": "bedrock/converse-stream-text.response.eventstream",
                    "chunk_delay_ms": 1,
                },
            }
        ]
    )
    events = list(brt.converse_stream(modelId=MODEL, messages=MSGS)["stream"])
    assert len(events) == 33 and events[-1]["metadata"]["usage"]["totalTokens"] == 95
    mock.script(
        [
            {
                "match": {"protocol": "bedrock"},
                "response": {
                    "headers": {"content-type": "application/vnd.amazon.eventstream"},
                    "sse": [
                        {"messageStart": {"role": "assistant"}},
                        {
                            "contentBlockDelta": {
                                "contentBlockIndex": 0,
                                "delta": {"text": "Sorry, I can't help with that."},
                            }
                        },
                        {"contentBlockStop": {"contentBlockIndex": 0}},
                        {"messageStop": {"stopReason": "guardrail_intervened"}},
                        {
                            "metadata": {
                                "usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3},
                                "metrics": {"latencyMs": 5},
                            }
                        },
                    ],
                },
            }
        ]
    )
    r = signed(mock, stream=True)
    ours = decode(r.content)
    assert ours[-2].stop_reason is StopReason.SAFETY
    assert [e.value for e in ours if isinstance(e, BlockDelta)] == ["Sorry, I can't help with that."]


def test_drop_after_is_a_truncated_stream(mock: MockProcess) -> None:
    mock.script([{"match": {"protocol": "bedrock"}, "response": {"drop_after": 3}}])
    provider = SimpleNamespace(base_url=mock.url, path=None, path_base=None, api_key="AK:SK", auth=None)
    raw = json.dumps(
        BEDROCK.write_request(IrRequest(messages=[IrMessage("user", [TextBlock("hi")])]), MODEL)
    ).encode()
    url, headers, content = BEDROCK.egress_request(provider, MODEL, True, raw, None)
    buf = b""
    with (
        httpx.Client(timeout=5) as c,
        c.stream("POST", url, headers=headers, content=content) as r,
        pytest.raises(httpx.HTTPError),
    ):
        for part in r.iter_raw():
            buf += part
    events = decode(buf)
    assert [type(e).__name__ for e in events][-1] == "StreamError"
    assert events[-1] == StreamError("api_error", "upstream stream ended prematurely")
