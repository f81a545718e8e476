"""The key routes of the admin API against a real ``busbar`` process over HTTP: mint, list, get,
patch (ETag), revoke, rotate, delete, Idempotency-Key (malformed mint bodies: test_keys_bad_input.py,
a gateway of their own so neither module nears the 60-a-minute mutation budget) (docs/admin.md#keys)."""
from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from tests.admin.conftest import PROVIDER_SECRET, TOKEN, AdminGateway


def claims(token: str) -> dict[str, Any]:
    payload = token.removeprefix("bbk_").split(".")[0]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def mint(gw: AdminGateway, **body: Any) -> dict[str, Any]:
    r = gw.client.post("/keys", json={"name": "k", **body})
    assert r.status_code == 201, r.text
    return r.json()


def test_mint_returns_the_token_once_with_every_field(gw: AdminGateway) -> None:
    before = int(time.time())
    r = gw.client.post("/keys", json={"name": "bob-laptop", "allowed_pools": ["fast"], "labels": {"team": "growth"},
                                      "expires_in": "7d"})
    assert r.status_code == 201
    body = r.json()
    assert body["id"].startswith("vk_") and len(body["id"]) == 27
    assert body["token"].startswith("bbk_")
    assert {k: body[k] for k in ("name", "state", "enabled", "group", "allowed_pools", "labels", "generation",
                                 "deleted_at", "credentials", "warnings")} == {
        "name": "bob-laptop", "state": "active", "enabled": True, "group": None, "allowed_pools": ["fast"],
        "labels": {"team": "growth"}, "generation": 0, "deleted_at": None, "credentials": [], "warnings": []}
    assert before <= body["created_at"] <= int(time.time())
    assert body["expires_at"] == body["created_at"] + 7 * 86400
    c = claims(body["token"])
    assert (c["sub"], c["exp"], c["g"]) == (body["id"], body["expires_at"], 0)
    # the token is in no later reply
    got = gw.client.get(f"/keys/{body['id']}")
    assert got.status_code == 200 and "token" not in got.json() and body["token"] not in got.text
    assert body["token"] not in gw.client.get("/keys", params={"limit": 1000}).text


def test_expires_in_short_and_default_lifetime(gw: AdminGateway) -> None:
    short = mint(gw, expires_in="2s")
    assert short["expires_at"] == short["created_at"] + 2
    default = mint(gw)
    assert default["expires_at"] == default["created_at"] + 90 * 86400
    at = int(time.time()) + 3600
    assert mint(gw, expires_at=at)["expires_at"] == at


def test_allowed_pools_empty_list_is_kept_and_unknown_pool_warns(gw: AdminGateway) -> None:
    assert mint(gw, allowed_pools=[])["allowed_pools"] == []
    body = mint(gw, allowed_pools=["fast", "nosuch"])
    assert body["allowed_pools"] == ["fast", "nosuch"]
    assert body["warnings"] == ["allowed_pools: 'nosuch' is not a configured pool (the key cannot reach it "
                                "until it is)"]


def test_list_is_cursor_paginated(gw: AdminGateway) -> None:
    ids = sorted(mint(gw, name="page-me")["id"] for _ in range(3))
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"prefix": "page-me", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = gw.client.get("/keys", params=params).json()
        assert set(page) == {"items", "next_cursor"}
        assert len(page["items"]) <= 2
        seen += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    bad = gw.client.get("/keys", params={"cursor": "!!!"})
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_request")


def test_patch_with_etag_and_stale_etag_is_409(gw: AdminGateway) -> None:
    key = mint(gw)
    got = gw.client.get(f"/keys/{key['id']}")
    etag = got.headers["etag"]
    assert etag.startswith('"') and len(etag) == 18
    ok = gw.client.patch(f"/keys/{key['id']}", json={"enabled": False}, headers={"If-Match": etag})
    assert ok.status_code == 200
    assert (ok.json()["enabled"], ok.json()["state"]) == (False, "disabled")
    assert ok.headers["etag"] != etag
    stale = gw.client.patch(f"/keys/{key['id']}", json={"enabled": True}, headers={"If-Match": etag})
    assert stale.status_code == 409
    assert stale.json() == {"error": {"code": "version_conflict", "message":
                                      f"key '{key['id']}' changed since that ETag was read; GET it again and "
                                      f"retry with the new ETag"}}
    bad = gw.client.patch(f"/keys/{key['id']}", json={"enabled": True}, headers={"If-Match": "abc"})
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_request")
    star = gw.client.patch(f"/keys/{key['id']}", json={"enabled": True}, headers={"If-Match": "*"})
    assert (star.status_code, star.json()["state"]) == (200, "active")


def test_patch_group_three_state(gw: AdminGateway) -> None:
    key = mint(gw)
    absent = gw.client.patch(f"/keys/{key['id']}", json={})
    assert (absent.status_code, absent.json()["group"]) == (200, None)
    unknown = gw.client.patch(f"/keys/{key['id']}", json={"group": "ghost"})
    assert unknown.status_code == 400
    assert unknown.json()["error"] == {"code": "invalid_request", "message": "group 'ghost' is not a configured "
                                                                             "group; add it under groups: or fix the "
                                                                             "name"}
    unbind = gw.client.patch(f"/keys/{key['id']}", json={"group": None})
    assert (unbind.status_code, unbind.json()["group"]) == (200, None)
    extra = gw.client.patch(f"/keys/{key['id']}", json={"name": "x"})
    assert extra.json()["error"] == {"code": "invalid_request", "message": "name: unknown field; remove it"}


def test_revoke_rotate_delete_lifecycle(gw: AdminGateway) -> None:
    key = mint(gw, issue_aws_credential=True)
    assert key["aws_access_key_id"].startswith("BBAK") and len(key["aws_access_key_id"]) == 20
    assert len(key["aws_secret_access_key"]) == 40
    assert [c["public_id"] for c in key["credentials"]] == [key["aws_access_key_id"]]

    rot = gw.client.post(f"/keys/{key['id']}/rotate")
    assert rot.status_code == 200
    body = rot.json()
    assert (body["id"], body["generation"]) == (key["id"], 1)
    assert body["token"] != key["token"] and claims(body["token"])["g"] == 1
    assert body["aws_access_key_id"] != key["aws_access_key_id"]
    live = [c for c in body["credentials"] if c["revoked_at"] is None]
    assert [c["public_id"] for c in live] == [body["aws_access_key_id"]]

    rev = gw.client.post(f"/keys/{key['id']}/revoke", json={"reason": "laptop lost"})
    assert (rev.status_code, rev.json()["state"]) == (200, "revoked")
    assert all(c["revoked_at"] is not None for c in rev.json()["credentials"])
    again = gw.client.post(f"/keys/{key['id']}/revoke")
    assert (again.status_code, again.json()["state"]) == (200, "revoked")
    for call in (lambda: gw.client.post(f"/keys/{key['id']}/rotate"),
                 lambda: gw.client.patch(f"/keys/{key['id']}", json={"enabled": True})):
        r = call()
        assert (r.status_code, r.json()["error"]["code"]) == (409, "conflict")

    gone = gw.client.delete(f"/keys/{key['id']}")
    assert gone.status_code == 200
    assert (gone.json()["state"], gone.json()["credentials"]) == ("tombstoned", [])
    assert gone.json()["deleted_at"] is not None
    listed = [i["id"] for i in gw.client.get("/keys", params={"limit": 1000}).json()["items"]]
    assert key["id"] not in listed
    with_tomb = gw.client.get("/keys", params={"limit": 1000, "include": "tombstoned"}).json()["items"]
    assert key["id"] in [i["id"] for i in with_tomb]
    r = gw.client.post(f"/keys/{key['id']}/rotate")
    assert (r.status_code, r.json()["error"]["code"]) == (409, "conflict")


@pytest.mark.parametrize(("method", "path"), [("GET", "/keys/vk_nope"), ("DELETE", "/keys/vk_nope"),
                                              ("POST", "/keys/vk_nope/revoke"), ("POST", "/keys/vk_nope/rotate"),
                                              ("PATCH", "/keys/vk_nope")])
def test_unknown_key_is_404(gw: AdminGateway, method: str, path: str) -> None:
    r = gw.client.request(method, path, json={} if method == "PATCH" else None)
    assert r.status_code == 404
    assert r.json() == {"error": {"code": "not_found", "message": "no key 'vk_nope'"}}


def test_idempotency_key_replays_mint_and_refuses_another_body(gw: AdminGateway) -> None:
    h = {"Idempotency-Key": "mint-once-1"}
    first = gw.client.post("/keys", json={"name": "idem"}, headers=h)
    second = gw.client.post("/keys", json={"name": "idem"}, headers=h)
    assert first.status_code == second.status_code == 201
    assert second.json()["id"] == first.json()["id"] and second.headers["idempotent-replayed"] == "true"
    other = gw.client.post("/keys", json={"name": "other"}, headers=h)
    assert other.status_code == 409
    assert other.json() == {"error": {"code": "conflict", "message": "Idempotency-Key was already used with a "
                                                                     "different request body; use a new key"}}


def test_no_reply_after_the_mint_carries_a_secret(gw: AdminGateway) -> None:
    key = mint(gw, issue_aws_credential=True)
    secrets = [key["token"], key["aws_secret_access_key"], TOKEN, PROVIDER_SECRET]
    signing = (gw.config_path.parent / "busbar-signing.key").read_text()
    private_b64 = "".join(line for line in signing.splitlines() if not line.startswith("-----"))
    secrets.append(private_b64)
    for path in ("/keys", f"/keys/{key['id']}", "/audit", "/audit/verify", "/info", "/config", "/plugins",
                 "/hooks", "/signing-key", "/openapi.json"):
        text = gw.client.get(path, params={"limit": 1000} if path in ("/keys", "/audit") else None).text
        for s in secrets:
            assert s not in text, (path, s[:8])
    sk = gw.client.get("/signing-key").json()
    assert set(sk) == {"kid", "algorithm", "public_key", "source"}
    assert (sk["algorithm"], sk["source"], sk["kid"]) == ("ed25519", "file", claims(key["token"])["kid"])


def test_idempotency_key_replays_a_rotation(gw: AdminGateway) -> None:
    key = mint(gw)
    h = {"Idempotency-Key": f"rotate-{key['id']}"}
    first = gw.client.post(f"/keys/{key['id']}/rotate", headers=h)
    again = gw.client.post(f"/keys/{key['id']}/rotate", headers=h)
    assert (first.status_code, again.status_code) == (200, 200)
    assert (again.json()["token"], again.json()["generation"]) == (first.json()["token"], 1)
    assert gw.client.get(f"/keys/{key['id']}").json()["generation"] == 1
