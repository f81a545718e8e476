"""Keys minted, revoked, rotated, frozen and deleted through the admin API of a real busbar process,
presented by the official SDKs to its data plane (``auth.chain: [keys]``).

Every refusal is the protocol's native shape (tests/auth/shapes.py); a revocation through the admin
API is enforced within a second.
"""
from __future__ import annotations

import time

import anthropic
import boto3
import cohere
import httpx
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from google import genai
from google.genai import types as genai_types

from tests.auth.conftest import UPSTREAM_KEYS, config
from tests.auth.shapes import assert_refused, forbidden, post
from tests.support.gateway import BusbarProcess, free_port
from tests.support.waiting import wait_until

ADMIN_TOKEN = "adm-frontdoor-7c1"
MSG = [{"role": "user", "content": "hi"}]


class Gateway(BusbarProcess):
    def __init__(self, text: str, tmp_path, mock_url: str) -> None:
        self.admin_port = free_port()
        admin = (f'admin_listen: "127.0.0.1:{self.admin_port}"\n')
        text = text.replace("auth:\n", admin + "auth:\n  admin_auth:\n    - admin-tokens: { token: { env: T_ADMIN } }\n", 1)
        super().__init__(text.replace("MOCK", mock_url), tmp_path, env={**UPSTREAM_KEYS, "T_ADMIN": ADMIN_TOKEN})
        self.admin = httpx.Client(base_url=f"http://127.0.0.1:{self.admin_port}/api/v1/admin", timeout=30,
                                  headers={"authorization": f"Bearer {ADMIN_TOKEN}"})

    def mint(self, **body) -> dict:
        r = self.admin.post("/keys", json={"name": f"k{time.time_ns()}", **body})
        assert r.status_code in (200, 201), r.text
        return r.json()

    def stop(self) -> None:
        self.admin.close()
        super().stop()


@pytest.fixture(scope="module")
def gw(tmp_path_factory, mock):
    g = Gateway(config(extra="metrics: { buffer_seconds: 60 }\n"), tmp_path_factory.mktemp("adminkeys"), mock.url)
    g.start()
    yield g
    g.stop()


def test_every_sdk_works_with_a_key_minted_over_the_admin_api(gw):
    tok = gw.mint()["token"]
    assert openai.OpenAI(base_url=gw.url + "/v1", api_key=tok, max_retries=0).chat.completions.create(
        model="to-openai", messages=MSG).choices[0].message.content
    assert anthropic.Anthropic(base_url=gw.url, api_key=tok, max_retries=0).messages.create(
        model="to-anthropic", max_tokens=16, messages=MSG).content[0].text
    assert genai.Client(api_key=tok, http_options=genai_types.HttpOptions(
        base_url=gw.url, retry_options=genai_types.HttpRetryOptions(attempts=1))).models.generate_content(
        model="to-gemini", contents="hi").text
    assert cohere.ClientV2(api_key=tok, base_url=gw.url).chat(
        model="to-cohere", messages=MSG, request_options={"max_retries": 0}).message.content[0].text


def test_boto3_with_the_minted_aws_credential(gw):
    key = gw.mint(issue_aws_credential=True)
    c = boto3.client("bedrock-runtime", endpoint_url=gw.url, region_name="us-east-1",
                     aws_access_key_id=key["aws_access_key_id"], aws_secret_access_key=key["aws_secret_access_key"],
                     config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
    msgs = [{"role": "user", "content": [{"text": "hi"}]}]
    def served() -> bool:          # a new AWS credential is usable once the mirror syncs it (<= 0.25 s)
        try:
            return bool(c.converse(modelId="to-bedrock", messages=msgs)["output"]["message"]["content"][0]["text"])
        except ClientError:
            return False
    wait_until(served, timeout=1.0)
    assert gw.admin.post(f"/keys/{key['id']}/revoke").status_code == 200
    def refused() -> bool:
        try:
            c.converse(modelId="to-bedrock", messages=msgs)
        except ClientError as e:
            return e.response["Error"]["Code"] == "AccessDeniedException"
        return False
    wait_until(refused, timeout=1.0)


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini", "bedrock", "cohere"])
def test_revoke_over_the_admin_api_is_enforced_within_a_second(gw, protocol):
    key = gw.mint()
    assert post(gw.url, protocol, {"x-api-key": key["token"]}).status_code == 200
    t0 = time.monotonic()
    assert gw.admin.post(f"/keys/{key['id']}/revoke", json={"reason": "lost"}).status_code == 200
    wait_until(lambda: post(gw.url, protocol, {"x-api-key": key["token"]}).status_code != 200, timeout=1.0)
    assert time.monotonic() - t0 < 1.0
    assert_refused(post(gw.url, protocol, {"x-api-key": key["token"]}), protocol)


def test_rotate_refuses_the_old_token_and_serves_the_new(gw):
    key = gw.mint()
    new = gw.admin.post(f"/keys/{key['id']}/rotate").json()["token"]
    wait_until(lambda: post(gw.url, "openai", {"x-api-key": new}).status_code == 200, timeout=1.0)
    assert_refused(post(gw.url, "openai", {"x-api-key": key["token"]}), "openai")


def test_freeze_and_delete(gw):
    frozen, deleted = gw.mint(), gw.mint()
    etag = gw.admin.get(f"/keys/{frozen['id']}").headers["etag"]
    assert gw.admin.patch(f"/keys/{frozen['id']}", json={"enabled": False}, headers={"If-Match": etag}).status_code == 200
    assert gw.admin.delete(f"/keys/{deleted['id']}").status_code == 200
    for k in (frozen, deleted):
        wait_until(lambda k=k: post(gw.url, "cohere", {"authorization": f"Bearer {k['token']}"}).status_code == 401,
                   timeout=1.0)
        assert_refused(post(gw.url, "cohere", {"authorization": f"Bearer {k['token']}"}), "cohere")


def test_a_key_minted_with_expires_in_2s_is_refused_after_it(gw):
    key = gw.mint(expires_in="2s")
    assert post(gw.url, "anthropic", {"x-api-key": key["token"]}).status_code == 200
    wait_until(lambda: post(gw.url, "anthropic", {"x-api-key": key["token"]}).status_code == 401, timeout=4.0)
    assert_refused(post(gw.url, "anthropic", {"x-api-key": key["token"]}), "anthropic")


def test_allowed_pools_from_the_mint(gw):
    tok = gw.mint(allowed_pools=["to-openai"])["token"]
    assert post(gw.url, "openai", {"x-api-key": tok}).status_code == 200
    r = post(gw.url, "gemini", {"x-goog-api-key": tok})
    assert (r.status_code, r.json()) == forbidden("gemini", "to-gemini")


def test_a_revoked_key_used_again_is_audited_once(gw):
    key = gw.mint()
    assert gw.admin.post(f"/keys/{key['id']}/revoke").status_code == 200
    wait_until(lambda: post(gw.url, "openai", {"x-api-key": key["token"]}).status_code == 401, timeout=1.0)
    for _ in range(3):
        assert_refused(post(gw.url, "openai", {"x-api-key": key["token"]}), "openai")

    def refused_records() -> list[dict]:
        items = gw.admin.get("/audit", params={"action": "key.refused", "resource": f"key/{key['id']}"}).json()
        return items["items"]
    records = wait_until(refused_records, timeout=2.0)
    assert [(r["action"], r["resource"], r["outcome"], r["principal"]) for r in records] == [
        ("key.refused", f"key/{key['id']}", "revoked", key["id"])]


def test_metrics_is_behind_the_chain(gw):
    refused = httpx.get(gw.url + "/metrics")
    assert (refused.status_code, refused.json()) == (401, {"error": {
        "message": "Incorrect API key provided. Present a valid Busbar virtual key.", "type": "authentication_error",
        "param": None, "code": "invalid_api_key"}})
    assert httpx.get(gw.url + "/metrics", headers={"authorization": "Bearer garbage"}).status_code == 401
    ok = httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {gw.mint()['token']}"})
    assert ok.status_code == 200 and "busbar_" in ok.text
    assert httpx.get(gw.url + "/healthz").status_code == 200            # health stays open
