"""Cohere usage through a real busbar to the five other official SDKs (issue 11 item 22): every
shared Cohere capture, replayed by the mock provider, reaches each client with ``tokens`` (what
the model read and wrote) as its totals — never ``billed_units``."""
from __future__ import annotations

import anthropic
import boto3
import openai
import pytest
from botocore.config import Config
from google import genai
from google.genai import types

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  co: { protocol: cohere, base_url: MOCK, api_key: { env: T_COHERE_KEY } }
models:
  co-m: { provider: co, default_max_tokens: 1024 }
pools:
  to-cohere: { members: [ { model: co-m } ] }
"""
# capture -> (tokens.input_tokens, tokens.output_tokens)
CAPTURES = {
    "cohere/chat-text.response.json": (69, 89),
    "cohere/thinking.response.json": (2190, 1257),
    "cohere/tool-call.response.json": (968, 83),
    "cohere/tool-result-followup.response.json": (1094, 102),
}
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url, env={"T_COHERE_KEY": "co-key"})


def openai_chat(url):
    u = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0).chat.completions.create(
        model="to-cohere", messages=MSG).usage
    return u.prompt_tokens, u.completion_tokens, u.total_tokens


def openai_responses(url):
    u = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0).responses.create(
        model="to-cohere", input="hi").usage
    return u.input_tokens, u.output_tokens, u.total_tokens


def anthropic_messages(url):
    u = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0).messages.create(
        model="to-cohere", max_tokens=1024, messages=MSG).usage
    return u.input_tokens, u.output_tokens, u.input_tokens + u.output_tokens


def gemini(url):
    client = genai.Client(api_key="x", http_options=types.HttpOptions(
        base_url=url, retry_options=types.HttpRetryOptions(attempts=1)))
    u = client.models.generate_content(model="to-cohere", contents="hi").usage_metadata
    return u.prompt_token_count, u.candidates_token_count + (u.thoughts_token_count or 0), u.total_token_count


def bedrock(url):
    client = boto3.client("bedrock-runtime", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                          config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
    u = client.converse(modelId="to-cohere", messages=[{"role": "user", "content": [{"text": "hi"}]}])["usage"]
    return u["inputTokens"], u["outputTokens"], u["totalTokens"]


CLIENTS = {"openai": openai_chat, "responses": openai_responses, "anthropic": anthropic_messages,
           "google-genai": gemini, "boto3-bedrock": bedrock}


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("rel", sorted(CAPTURES))
def test_every_cohere_capture_reaches_every_client_with_the_tokens_totals(gw, mock, rel, client):
    mock.script([{"match": {"protocol": "cohere"}, "response": {"fixture": rel}}])
    total, out = CAPTURES[rel]
    assert CLIENTS[client](gw.url) == (total, out, total + out)
