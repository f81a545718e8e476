"""Bedrock ingress: boto3 ``bedrock-runtime`` clients signing with a key's AWS credential (SigV4).

The signature is recomputed with botocore's signer over the request as received; a wrong secret, an
unknown access key id, a body changed after signing, a lying ``x-amz-content-sha256`` and a revoked
key all get the same native 403 ``AccessDeniedException``.
"""
from __future__ import annotations

import datetime
import hashlib
import json

import boto3
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.auth.conftest import config
from tests.auth.shapes import UNAUTHENTICATED, assert_refused, forbidden

MESSAGES = [{"role": "user", "content": [{"text": "hi"}]}]


@pytest.fixture(scope="module")
def gw(inproc_factory, mock):
    return inproc_factory(config(), mock.url)


def client(gw, akid: str, secret: str):
    return boto3.client("bedrock-runtime", endpoint_url=gw.url, region_name="us-east-1",
                        aws_access_key_id=akid, aws_secret_access_key=secret,
                        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))


def refused(call) -> None:
    with pytest.raises(ClientError) as e:
        call()
    status, body = UNAUTHENTICATED["bedrock"]
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert e.value.response["Error"] == {"Code": "AccessDeniedException", "Message": body["message"]}


def test_boto3_converse_and_stream_with_the_key_credential(gw):
    key_id, _ = gw.mint()
    c = client(gw, *gw.mint_aws(key_id))
    r = c.converse(modelId="to-bedrock", messages=MESSAGES)
    assert r["output"]["message"]["content"][0]["text"]
    events = list(c.converse_stream(modelId="to-bedrock", messages=MESSAGES)["stream"])
    assert any("contentBlockDelta" in ev for ev in events)


def test_wrong_secret_and_unknown_access_key_are_refused_alike(gw):
    key_id, _ = gw.mint()
    akid, secret = gw.mint_aws(key_id)
    refused(lambda: client(gw, akid, secret + "x").converse(modelId="to-bedrock", messages=MESSAGES))
    refused(lambda: client(gw, "BBAKUNKNOWN000000000", secret).converse(modelId="to-bedrock", messages=MESSAGES))


def test_revoked_key_credential_is_refused(gw):
    key_id, _ = gw.mint()
    c = client(gw, *gw.mint_aws(key_id))
    c.converse(modelId="to-bedrock", messages=MESSAGES)
    gw.revoke(key_id)
    refused(lambda: c.converse(modelId="to-bedrock", messages=MESSAGES))


def test_allowed_pools_applies_to_the_credential(gw):
    key_id, _ = gw.mint(allowed_pools=["to-openai"])
    c = client(gw, *gw.mint_aws(key_id))
    with pytest.raises(ClientError) as e:
        c.converse(modelId="to-bedrock", messages=MESSAGES)
    status, body = forbidden("bedrock", "to-bedrock")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert e.value.response["Error"]["Message"] == body["message"]


def _signed(gw, akid: str, secret: str, body: bytes, extra: dict[str, str] | None = None) -> dict[str, str]:
    url = gw.url + "/model/to-bedrock/converse"
    req = AWSRequest(method="POST", url=url, data=body,
                     headers={"content-type": "application/json", **(extra or {})})
    SigV4Auth(Credentials(akid, secret), "bedrock", "us-east-1").add_auth(req)
    return dict(req.headers.items())


def test_body_changed_after_signing_is_refused(gw):
    key_id, _ = gw.mint()
    akid, secret = gw.mint_aws(key_id)
    body = json.dumps({"messages": MESSAGES}).encode()
    headers = _signed(gw, akid, secret, body)
    url = gw.url + "/model/to-bedrock/converse"
    assert httpx.post(url, content=body, headers=headers).status_code == 200
    tampered = body.replace(b"hi", b"ho")
    assert_refused(httpx.post(url, content=tampered, headers=headers), "bedrock")


def test_content_sha256_header_must_match_the_body(gw):
    key_id, _ = gw.mint()
    akid, secret = gw.mint_aws(key_id)
    body = json.dumps({"messages": MESSAGES}).encode()
    url = gw.url + "/model/to-bedrock/converse"
    good = _signed(gw, akid, secret, body, {"x-amz-content-sha256": hashlib.sha256(body).hexdigest()})
    assert httpx.post(url, content=body, headers=good).status_code == 200
    lying = _signed(gw, akid, secret, body, {"x-amz-content-sha256": hashlib.sha256(b"other").hexdigest()})
    assert_refused(httpx.post(url, content=body, headers=lying), "bedrock")


@pytest.mark.parametrize(("age_s", "status"), [(0, 200), (3600, 403)])
def test_a_stale_signature_is_refused(gw, age_s, status):
    key_id, _ = gw.mint()
    akid, secret = gw.mint_aws(key_id)
    body = json.dumps({"messages": MESSAGES}).encode()
    req = AWSRequest(method="POST", url=gw.url + "/model/to-bedrock/converse", data=body,
                     headers={"content-type": "application/json"})
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=age_s)
    signer = SigV4Auth(Credentials(akid, secret), "bedrock", "us-east-1")
    req.context["timestamp"] = old.strftime("%Y%m%dT%H%M%SZ")
    req.headers["X-Amz-Date"] = req.context["timestamp"]
    req.headers["host"] = gw.url.removeprefix("http://")
    sig = signer.signature(signer.string_to_sign(req, signer.canonical_request(req)), req)
    scope = f"{req.context['timestamp'][:8]}/us-east-1/bedrock/aws4_request"
    req.headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={akid}/{scope}, SignedHeaders="
                                    f"{signer.signed_headers(signer.headers_to_sign(req))}, Signature={sig}")
    r = httpx.post(gw.url + "/model/to-bedrock/converse", content=body, headers=dict(req.headers.items()))
    if status == 200:
        assert r.status_code == 200, r.text
    else:
        assert_refused(r, "bedrock")
