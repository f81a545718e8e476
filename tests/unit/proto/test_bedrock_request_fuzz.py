"""Malformed Bedrock Converse bodies (issue 11 item 14): any value of any type at any place of a
real Converse request is either read, or refused with ``BadRequest`` naming the field — never
another exception (which would be a 500) — and what is read can be written for every dialect."""
from __future__ import annotations

import json
import os

import orjson
import pytest
from busbar.proto.bedrock.request import read_request
from busbar.proto.errors import BadRequest
from busbar.proto.registry import DIALECTS
from busbar_mock_provider.fixtures import FixtureStore, default_fixtures_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.mutate import json_values, replaced

STORE = FixtureStore(default_fixtures_dir())
CAPTURES = ["bedrock/converse-tool-use.request.json", "bedrock/converse-image.request.json",
            "bedrock/converse-reasoning.request.json", "bedrock/converse-prompt-cache-write.request.json"]
TOOL_TURN = {"messages": [
    {"role": "user", "content": [{"text": "weather?"}]},
    {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"c": 1}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "sunny"}],
                                                 "status": "success"}}]}],
    "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": {"type": "object"}}}}],
                   "toolChoice": {"auto": {}}},
    "inferenceConfig": {"maxTokens": 100, "temperature": 0.5, "stopSequences": ["x"]}}


def _write_everywhere(body) -> None:
    try:
        ir = read_request(body)
    except BadRequest as e:
        assert e.message and "Error" not in e.message
        return
    ir.model = "m"
    for dialect in DIALECTS.values():
        try:
            dialect.write_request(ir, "up")
        except BadRequest:
            pass


@pytest.mark.parametrize("base", ["tool-turn", *CAPTURES])
@settings(max_examples=int(os.environ.get("BUSBAR_FUZZ_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(pick=st.integers(0, 10_000), value=json_values)
def test_any_value_anywhere_is_read_or_refused_with_a_400(base, pick, value):
    body = TOOL_TURN if base == "tool-turn" else orjson.loads(STORE.read(base))
    _write_everywhere(orjson.loads(json.dumps(replaced(body, pick, value))))   # as the front door parses it


@pytest.mark.parametrize(("content", "message"), [
    ([{}], 'messages.2.content.0.toolResult.content.0: must be one of {"text": ...}, {"json": ...}, '
           '{"image": ...}, {"document": ...}'),
    (["sunny"], 'messages.2.content.0.toolResult.content.0: must be one of {"text": ...}, {"json": ...}, '
                '{"image": ...}, {"document": ...}'),
    ("sunny", 'messages.2.content.0.toolResult.content: must be a list of blocks like [{"text": "..."}]'),
    ([{"text": 5}], "messages.2.content.0.toolResult.content.0.text: must be a string"),
    ([{"video": {}}], "messages.2.content.0.toolResult.content.0.video: not supported (text, image, document, "
                      "toolUse, toolResult, reasoningContent, cachePoint)"),
])
def test_malformed_tool_result_content_names_the_field_and_the_fix(content, message):
    body = orjson.loads(orjson.dumps(TOOL_TURN))
    body["messages"][2]["content"][0]["toolResult"]["content"] = content
    with pytest.raises(BadRequest) as e:
        read_request(body)
    assert e.value.message == message


@pytest.mark.parametrize(("path", "value", "message"), [
    (("toolConfig",), [], 'toolConfig: must be an object like {"tools": [{"toolSpec": {...}}]}, found array'),
    (("inferenceConfig",), 5, 'inferenceConfig: must be an object like {"maxTokens": 512}, found number'),
    (("inferenceConfig", "maxTokens"), "100", "inferenceConfig.maxTokens: must be an integer, found string"),
    (("inferenceConfig", "temperature"), True, "inferenceConfig.temperature: must be a number, found boolean"),
    (("inferenceConfig", "stopSequences"), [1], "inferenceConfig.stopSequences: must be a list of strings"),
    (("messages", 1, "content", 0, "toolUse"), "x",
     'messages.1.content.0.toolUse: must be an object like {"toolUseId": "t1", "name": "get_weather", '
     '"input": {}}, found string'),
    (("messages", 2, "content", 0, "toolResult"), None,
     'messages.2.content.0.toolResult: must be an object like {"toolUseId": "t1", "content": [{"text": "..."}]}, '
     'found null'),
    (("toolConfig", "toolChoice"), {"tool": {}},
     "toolConfig.toolChoice.tool.name: required, the name of one of toolConfig.tools"),
])
def test_wrong_typed_fields_name_the_field_and_the_fix(path, value, message):
    body = orjson.loads(orjson.dumps(TOOL_TURN))
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    with pytest.raises(BadRequest) as e:
        read_request(body)
    assert e.value.message == message
