"""Malformed Bedrock Converse bodies through a real busbar (issue 11 item 14): a cross-protocol
hop answers 400 ``ValidationException`` naming the field and the fix — never 500 ``internal
gateway error`` — and no upstream call is made. (Raw HTTP: boto3 refuses these shapes itself.)"""
from __future__ import annotations

import httpx
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  oa-m: { provider: oa }
pools:
  to-openai: { members: [ { model: oa-m } ] }
"""
TURN = [
    {"role": "user", "content": [{"text": "weather?"}]},
    {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {}}}]},
]


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


@pytest.mark.parametrize(("result", "message"), [
    ({"toolUseId": "t1", "content": [{}]},
     'messages.2.content.0.toolResult.content.0: must be one of {"text": ...}, {"json": ...}, {"image": ...}, '
     '{"document": ...}'),
    ({"toolUseId": "t1", "content": "sunny"},
     'messages.2.content.0.toolResult.content: must be a list of blocks like [{"text": "..."}]'),
    ("sunny", 'messages.2.content.0.toolResult: must be an object like {"toolUseId": "t1", "content": '
              '[{"text": "..."}]}, found string'),
])
@pytest.mark.parametrize("verb", ["converse", "converse-stream"])
def test_malformed_tool_result_is_a_400_validation_exception(gw, mock, result, message, verb):
    body = {"messages": [*TURN, {"role": "user", "content": [{"toolResult": result}]}]}
    r = httpx.post(f"{gw.url}/model/to-openai/{verb}", json=body, timeout=10)
    assert r.status_code == 400
    assert r.headers["x-amzn-errortype"].startswith("ValidationException")
    assert r.json() == {"message": message}
    assert mock.requests() == []
