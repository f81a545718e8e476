"""Fixtures for the non-chat operations: one mock provider and real busbar processes per module.

``gw`` is a gateway on the test module's own ``CONFIG`` (a module with another set-up defines its
own ``gw``); ``oa``, ``co`` and ``br`` are the openai, cohere and boto3 bedrock-runtime clients of
whichever ``gw`` the module sees, with retries off."""
from __future__ import annotations

import boto3
import cohere
import httpx
import openai
import pytest
from botocore.config import Config

from tests.support.fixtures import _clean_mock, gateways, mock  # noqa: F401

KEYS = {"T_OPENAI_KEY": "sk-test-openai", "T_COHERE_KEY": "co-test-key", "T_GEMINI_KEY": "g-test-key",
        "T_AWS_CREDS": "AKIDEXAMPLE:secretkey", "T_ANTHROPIC_KEY": "sk-ant-api-test"}


@pytest.fixture(scope="module")
def gateway_factory(tmp_path_factory):
    yield from gateways(tmp_path_factory, KEYS)


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, request):  # noqa: F811
    return gateway_factory(request.module.CONFIG, mock.url)


@pytest.fixture()
def oa(gw):
    with openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture()
def co(gw):
    with httpx.Client(timeout=20) as http:
        yield cohere.ClientV2(api_key="x", base_url=gw.url, httpx_client=http)


@pytest.fixture()
def br(gw):
    return boto3.client("bedrock-runtime", endpoint_url=gw.url, region_name="us-east-1",
                        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=20))
