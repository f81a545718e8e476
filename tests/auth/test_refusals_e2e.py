"""A real busbar with ``auth.chain: [keys]`` refuses every caller without a valid key, natively.

No key, a blank key, garbage, a malformed ``bbk_`` token and a well-formed token signed by another
key all get the same answer per protocol (tests/auth/shapes.py), through raw HTTP and through each
official SDK; nothing reaches the provider.
"""
from __future__ import annotations

import time

import anthropic
import boto3
import cohere
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from busbar.auth.signing import generate_text, keyring_from_text
from busbar.auth.tokens import mint
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from tests.auth.conftest import PROTOCOLS, config
from tests.auth.shapes import assert_refused, post

FOREIGN = mint(keyring_from_text(generate_text(), "foreign"), "vk_test1", int(time.time()) + 3600)
BAD = {
    "none": {},
    "blank bearer": {"authorization": "Bearer", "x-api-key": ""},
    "garbage bearer": {"authorization": "Bearer sk-garbage"},
    "garbage x-api-key": {"x-api-key": "sk-garbage"},
    "garbage x-goog-api-key": {"x-goog-api-key": "garbage"},
    "malformed bbk": {"authorization": "Bearer bbk_not.a.token"},
    "foreign signature": {"authorization": f"Bearer {FOREIGN}"},
}


@pytest.fixture(scope="module")
def gw(busbar_factory, mock):
    return busbar_factory(config(), mock.url)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("case", list(BAD))
def test_refused_with_the_native_shape(gw, mock, protocol, case):
    r = post(gw.url, protocol, BAD[case])
    assert_refused(r, protocol)
    assert mock.requests() == []


def test_openai_sdk_sees_authentication_error(gw):
    c = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-garbage", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        c.chat.completions.create(model="to-openai", messages=[{"role": "user", "content": "hi"}])
    assert e.value.status_code == 401 and e.value.code == "invalid_api_key"


def test_anthropic_sdk_sees_authentication_error(gw):
    c = anthropic.Anthropic(base_url=gw.url, api_key="sk-garbage", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as e:
        c.messages.create(model="to-anthropic", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert e.value.status_code == 401
    assert e.value.body == {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}


def test_genai_sdk_sees_invalid_argument(gw):
    c = genai.Client(api_key="garbage", http_options=genai_types.HttpOptions(
        base_url=gw.url, retry_options=genai_types.HttpRetryOptions(attempts=1)))
    with pytest.raises(genai_errors.ClientError) as e:
        c.models.generate_content(model="to-gemini", contents="hi")
    assert (e.value.code, e.value.status) == (400, "INVALID_ARGUMENT")
    assert e.value.message == "API key not valid. Please pass a valid API key."


def test_cohere_sdk_sees_unauthorized(gw):
    c = cohere.ClientV2(api_key="garbage", base_url=gw.url)
    with pytest.raises(cohere.errors.UnauthorizedError) as e:
        c.chat(model="to-cohere", messages=[{"role": "user", "content": "hi"}], request_options={"max_retries": 0})
    assert e.value.status_code == 401 and e.value.body == {"message": "invalid api token"}


def test_boto3_with_an_unknown_aws_credential_sees_access_denied(gw):
    c = boto3.client("bedrock-runtime", endpoint_url=gw.url, region_name="us-east-1",
                     aws_access_key_id="BBAKUNKNOWN0000000000", aws_secret_access_key="x" * 40,
                     config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
    with pytest.raises(ClientError) as e:
        c.converse(modelId="to-bedrock", messages=[{"role": "user", "content": [{"text": "hi"}]}])
    err = e.value.response
    assert err["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert err["Error"] == {"Code": "AccessDeniedException",
                            "Message": "The security token included in the request is invalid."}
