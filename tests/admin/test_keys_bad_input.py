"""Malformed mint bodies against a real ``busbar`` process: each is ``400 invalid_request`` with a
message naming the field and the fix (docs/admin.md#errors). A module of its own: its gateway's
mutation budget (60 a minute per principal) is not shared with test_keys_api.py."""
from __future__ import annotations

import json
from typing import Any

import pytest

from tests.admin.conftest import AdminGateway


@pytest.mark.parametrize(("body", "message"), [
    ({"name": "a", "bogus": 1}, "bogus: unknown field; remove it"),
    ({}, "name: required"),
    ({"name": ""}, "name: String should have at least 1 character"),
    ({"name": 5}, "name: Input should be a valid string"),
    ({"name": "a", "expires_in": "5y"}, "expires_in: '5y' is not a duration; write a positive whole number and one "
                                        "unit: s, m, h, d or w (e.g. \"30m\", \"7d\")"),
    ({"name": "a", "expires_in": "0s"}, "expires_in: '0s' is not a duration; write a positive whole number and one "
                                        "unit: s, m, h, d or w (e.g. \"30m\", \"7d\")"),
    ({"name": "a", "expires_in": "7d", "expires_at": 4102444800},
     "expires_in and expires_at are mutually exclusive; send one"),
    ({"name": "a", "expires_at": 1000}, None),
    ({"name": "a", "labels": {"team": 1}}, "labels.team: Input should be a valid string"),
    ({"name": "a", "allowed_pools": "fast"}, "allowed_pools: Input should be a valid list"),
    ({"name": "a", "issue_aws_credential": "yes"}, "issue_aws_credential: Input should be a valid boolean"),
    ({"name": "a", "group": "nope"}, "group 'nope' is not a configured group; add it under groups:, or pass parent "
                                     "to auto-provision it"),
    ({"name": "a", "group": "nope", "parent": "missing"}, "parent 'missing' is not a configured group; name an "
                                                          "existing group"),
    ({"name": "a", "parent": "x"}, "parent needs group: name the group to bind (auto-provisioned under parent when "
                                   "it does not exist)"),
], ids=lambda v: json.dumps(v)[:40] if isinstance(v, dict) else None)
def test_malformed_mint_bodies_are_400_invalid_request(gw: AdminGateway, body: dict[str, Any],
                                                      message: str | None) -> None:
    r = gw.client.post("/keys", json=body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_request"
    if message is None:    # the past expires_at names the instant
        assert err["message"].startswith("expires_at: 1000 is not in the future (now is ")
    else:
        assert err["message"] == message


def test_non_json_bodies_are_400(gw: AdminGateway) -> None:
    r = gw.client.post("/keys", content=b"{not json", headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (400, {"error": {"code": "invalid_request",
                                                         "message": "the body is not valid JSON"}})
    r = gw.client.post("/keys", content=b"[1, 2]", headers={"content-type": "application/json"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
    r = gw.client.post("/keys")
    assert (r.status_code, r.json()) == (400, {"error": {"code": "invalid_request", "message":
                                                         "a JSON object body is required (content-type: "
                                                         "application/json)"}})


