"""``auth.upstream_credentials: passthrough`` through a real busbar: the caller's own key reaches the
provider in its native header (never the lane's), and the provider's 401 is relayed to the caller
without putting the lane down."""
from __future__ import annotations

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from tests.auth.conftest import UPSTREAM_KEYS, config
from tests.auth.shapes import post


@pytest.fixture(scope="module")
def gw(busbar_factory, mock):
    return busbar_factory(config("[]").replace("auth:\n", "auth:\n  upstream_credentials: passthrough\n"), mock.url)


def _sent(mock) -> dict:
    (req,) = mock.requests()
    return {k.lower(): v for k, v in req["headers"].items()}


def test_openai_caller_key_goes_upstream_as_bearer(gw, mock):
    c = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-caller-own-1", max_retries=0)
    assert c.chat.completions.create(model="to-openai", messages=[{"role": "user", "content": "hi"}]).choices
    assert _sent(mock)["authorization"] == "Bearer sk-caller-own-1"


def test_anthropic_caller_key_goes_upstream_as_x_api_key(gw, mock):
    c = anthropic.Anthropic(base_url=gw.url, api_key="sk-ant-api-caller-2", max_retries=0)
    c.messages.create(model="to-anthropic", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    sent = _sent(mock)
    assert sent["x-api-key"] == "sk-ant-api-caller-2"
    assert "authorization" not in sent and UPSTREAM_KEYS["KEY_ANTHROPIC"] not in str(sent)


def test_gemini_caller_key_goes_upstream_as_x_goog_api_key(gw, mock):
    c = genai.Client(api_key="caller-g-3", http_options=genai_types.HttpOptions(
        base_url=gw.url, retry_options=genai_types.HttpRetryOptions(attempts=1)))
    assert c.models.generate_content(model="to-gemini", contents="hi").text
    assert _sent(mock)["x-goog-api-key"] == "caller-g-3"


def test_a_provider_401_is_the_callers_and_leaves_the_lane_up(gw, mock):
    mock.script([{"match": {"protocol": "openai"}, "times": 1, "response": {"status": 401}}])
    bad = post(gw.url, "openai", {"authorization": "Bearer sk-caller-wrong"})
    assert bad.status_code == 401
    assert bad.json()["error"]["code"] == "invalid_api_key"
    assert len(mock.requests()) == 1                     # relayed at once: no failover, no retry
    assert post(gw.url, "openai", {"authorization": "Bearer sk-caller-right"}).status_code == 200


def test_with_own_credentials_the_same_401_puts_the_lane_down(inproc_factory, mock):
    own = inproc_factory(config("[]"), mock.url)
    mock.script([{"match": {"protocol": "openai"}, "times": 1, "response": {"status": 401}}])
    assert post(own.url, "openai", {}).status_code == 503          # the lane's key failed: hard-down
    assert post(own.url, "openai", {}).status_code == 503
