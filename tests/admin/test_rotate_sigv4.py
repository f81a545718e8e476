"""Rotating a key revokes its old AWS SigV4 pair on the data plane of a real busbar process.

A Bedrock ``converse`` signed with botocore's ``SigV4Auth`` using the pair from the mint is served;
after ``POST /keys/{id}/rotate`` the old pair gets Bedrock's native 403 ``AccessDeniedException``
within a second and the pair from the rotate reply is served (docs/admin.md#keys).
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]
from busbar_mock_provider.process import MockProcess

from tests.admin.conftest import TOKEN
from tests.support.gateway import BusbarProcess, free_port
from tests.support.waiting import wait_until

CONFIG = """
listen: "127.0.0.1:{port}"
admin_listen: "127.0.0.1:ADMIN_PORT"
auth:
  chain: [keys]
  admin_auth:
    - admin-tokens: { token: { env: T_ADMIN_TOKEN } }
providers:
  up-bedrock: { protocol: bedrock, base_url: MOCK, api_key: { env: KEY_BEDROCK } }
models:
  m-bedrock: { provider: up-bedrock, default_max_tokens: 64 }
pools:
  to-bedrock: { members: [ { model: m-bedrock } ] }
"""
BODY = json.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}).encode()
REFUSED = {"message": "The security token included in the request is invalid."}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BusbarProcess, httpx.Client]]:
    with MockProcess() as mock:
        admin_port = free_port()
        text = CONFIG.replace("ADMIN_PORT", str(admin_port)).replace("MOCK", mock.url)
        g = BusbarProcess(text, Path(tmp_path_factory.mktemp("rotate")),
                          env={"T_ADMIN_TOKEN": TOKEN, "KEY_BEDROCK": "AKIDEXAMPLE:secretkey"})
        g.start()
        admin = httpx.Client(base_url=f"http://127.0.0.1:{admin_port}/api/v1/admin", timeout=30,
                             headers={"authorization": f"Bearer {TOKEN}"})
        try:
            yield g, admin
        finally:
            admin.close()
            g.stop()


def converse(url: str, akid: str, secret: str) -> httpx.Response:
    """POST a Bedrock converse signed by botocore with ``(akid, secret)``."""
    req = AWSRequest(method="POST", url=url + "/model/to-bedrock/converse", data=BODY,
                     headers={"content-type": "application/json"})
    SigV4Auth(Credentials(akid, secret), "bedrock", "us-east-1").add_auth(req)
    return httpx.post(req.url, content=BODY, headers=dict(req.headers.items()), timeout=10)


def test_rotate_refuses_the_old_aws_pair_within_a_second_and_serves_the_new(
        gw: tuple[BusbarProcess, httpx.Client]) -> None:
    g, admin = gw
    minted = admin.post("/keys", json={"name": "rot-aws", "issue_aws_credential": True})
    assert minted.status_code == 201, minted.text
    key = minted.json()
    old = (key["aws_access_key_id"], key["aws_secret_access_key"])
    wait_until(lambda: converse(g.url, *old).status_code == 200, timeout=1.0, what="the minted pair served")

    r = admin.post(f"/keys/{key['id']}/rotate")
    assert r.status_code == 200, r.text
    rotated = r.json()
    new = (rotated["aws_access_key_id"], rotated["aws_secret_access_key"])
    assert new[0] != old[0]
    t0 = time.monotonic()
    wait_until(lambda: converse(g.url, *old).status_code == 403, timeout=1.0, what="the old pair refused")
    assert time.monotonic() - t0 < 1.0
    refused = converse(g.url, *old)
    assert (refused.status_code, refused.json()) == (403, REFUSED)
    assert refused.headers["x-amzn-errortype"].split(":")[0] == "AccessDeniedException"
    served = wait_until(lambda: (s := converse(g.url, *new)).status_code == 200 and s, timeout=1.0,
                        what="the rotated pair served")
    assert served.json()["output"]["message"]["content"][0]["text"]

    creds = admin.get(f"/keys/{key['id']}").json()["credentials"]
    assert sorted((c["public_id"], c["revoked_at"] is None) for c in creds) == sorted([(old[0], False),
                                                                                       (new[0], True)])

    # a second rotate replaces the first pair's revoked row: neither earlier pair is served again
    third = admin.post(f"/keys/{key['id']}/rotate").json()
    latest = (third["aws_access_key_id"], third["aws_secret_access_key"])
    wait_until(lambda: converse(g.url, *new).status_code == 403, timeout=1.0, what="the second pair refused")
    wait_until(lambda: converse(g.url, *latest).status_code == 200, timeout=1.0, what="the third pair served")
    for pair in (old, new):
        r = converse(g.url, *pair)
        assert (r.status_code, r.json()) == (403, REFUSED)
