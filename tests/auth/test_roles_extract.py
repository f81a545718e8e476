"""Token extraction order and the role-binding grant rules (busbar.auth.extract, busbar.auth.roles)."""
from __future__ import annotations

import pytest
from busbar.auth.extract import presented_token
from busbar.auth.roles import data_grant, listed_pools
from busbar.config.schema_access import RoleBinding


@pytest.mark.parametrize(("headers", "token"), [
    ({}, None),
    ({"authorization": "Bearer a", "x-api-key": "b", "x-goog-api-key": "c"}, "a"),
    ({"authorization": "bearer  a ", "x-api-key": "b"}, "a"),
    ({"authorization": "Bearer ", "x-api-key": "b"}, "b"),
    ({"authorization": "Basic Zm9vOmJhcg==", "x-api-key": "b"}, "b"),
    ({"authorization": "AWS4-HMAC-SHA256 Credential=x", "x-goog-api-key": "c"}, "c"),
    ({"x-api-key": "  ", "x-goog-api-key": "c"}, "c"),
    ({"x-api-key": "", "x-goog-api-key": " "}, None),
])
def test_extraction_order_blank_is_absent(headers, token):
    assert presented_token(headers) == token


B = {"eng": RoleBinding(allowed_pools=["fast"], group="growth"), "ml": RoleBinding(allowed_pools=["gpu"]),
     "platform": RoleBinding(group="acme"), "none": RoleBinding(allowed_pools=[])}


@pytest.mark.parametrize(("roles", "grant"), [
    (["eng"], ("growth", frozenset({"fast"}))),
    (["eng", "ml"], ("growth", frozenset({"fast", "gpu"}))),          # pools union, first group wins
    (["ml", "eng"], ("growth", frozenset({"fast", "gpu"}))),          # ml binds no group: eng's is first
    (["platform", "eng"], ("acme", None)),                             # an omitted grant widens to all
    (["none"], (None, frozenset())),                                   # [] is no pool
    (["unbound"], (None, frozenset())),                                # an unbound role grants nothing
    ([], (None, frozenset())),
])
def test_data_grant(roles, grant):
    assert data_grant(B, roles) == grant


def test_listed_pools_survive_a_widening_role():
    assert data_grant(B, ["platform", "eng", "ml"]) == ("acme", None)
    assert listed_pools(B, ["platform", "eng", "ml", "unbound"]) == frozenset({"fast", "gpu"})
    assert listed_pools(B, ["platform"]) == frozenset()
