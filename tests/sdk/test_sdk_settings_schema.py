"""busbar_sdk.settings_schema: the Busbar keywords a plugin's settings schema may carry, read once for
the kernel's config validation and refused in a manifest when misused (docs/plugin-format.md
"Settings schema keywords")."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from busbar_sdk.artifact import ArtifactError, parse_manifest_bytes
from busbar_sdk.settings_schema import NO_RULES, GatewayRefs, SettingsRules, gateway_refs, settings_rules

REPO = Path(__file__).resolve().parents[2]
GOOD = {"name": "acme", "alias": "acme", "kind": "hook", "version": "1.0.0", "publisher": "acme",
        "abi_version": 1, "sha256": "0" * 64, "signature": ""}


def test_the_forwarders_schema_declares_its_egress_url_and_allow_list() -> None:
    schema = (REPO / "plugins" / "busbar-webrequest-hook" / "src" / "busbar_webrequest_hook"
              / "settings_schema.json").read_text()
    rules = settings_rules(schema)
    assert (rules.required, rules.egress_urls, rules.egress_allow) == (("url",), ("url",), "allow_hosts")
    assert rules.describe("url") == "The sidecar endpoint every message is POSTed to"
    assert rules.describe("nope") == ""


def test_no_schema_and_no_keywords_mean_nothing_to_check() -> None:
    assert settings_rules(None) is NO_RULES
    rules = settings_rules({"type": "object", "properties": {"url": {"type": "string"}}})
    assert (rules.required, rules.egress_urls, rules.egress_allow) == ((), (), None)
    assert SettingsRules() == NO_RULES


@pytest.mark.parametrize(("props", "error"), [
    ({"url": {"type": "string", "x-busbar-egress-url": "yes"}}, "properties.url.x-busbar-egress-url must be true"),
    ({"url": {"type": "integer", "x-busbar-egress-url": True}},
     'properties.url: x-busbar-egress-url needs "type": "string"'),
    ({"allow": {"type": "string", "x-busbar-egress-allow": True}},
     'properties.allow: x-busbar-egress-allow needs "type": "array"'),
    ({"a": {"type": "array", "x-busbar-egress-allow": True}, "b": {"type": "array", "x-busbar-egress-allow": True}},
     "x-busbar-egress-allow is on both a and b; one allow-list per plugin"),
    ({"pool": {"type": "array", "x-busbar-gateway-pool": True}},
     'properties.pool: x-busbar-gateway-pool needs "type": "string"'),
    ({"a": {"type": "string", "x-busbar-gateway-pool": True}, "b": {"type": "string", "x-busbar-gateway-pool": True}},
     "x-busbar-gateway-pool is on both a and b; one gateway pool per plugin"),
], ids=["not-true", "url-not-string", "allow-not-array", "two-allow-lists", "pool-not-string", "two-pools"])
def test_a_misused_keyword_is_refused_in_the_schema_and_in_a_manifest(props: dict, error: str) -> None:
    schema = {"type": "object", "properties": props}
    with pytest.raises(ValueError, match="^" + error.replace("(", r"\(").replace(")", r"\)") + "$"):
        settings_rules(schema)
    raw = json.dumps(GOOD | {"settings_schema": json.dumps(schema)}).encode()
    with pytest.raises(ArtifactError) as err:
        parse_manifest_bytes(raw)
    assert err.value.reason == f"manifest.json: field 'settings_schema': {error}"


GATEWAY_SCHEMA = {"type": "object", "properties": {
    "pool": {"type": "string", "x-busbar-gateway-pool": True},
    "model": {"type": "string", "x-busbar-gateway-model": True},
    "fallback_models": {"type": "array", "items": {"type": "string", "x-busbar-gateway-model": True}}}}


def test_gateway_refs_name_the_pool_and_every_model_by_key_path() -> None:
    refs = gateway_refs(json.dumps(GATEWAY_SCHEMA), {"pool": "llms", "model": "a", "fallback_models": ["b", 3, "c"]})
    assert refs == GatewayRefs("pool", "llms", (("model", "a"), ("fallback_models[0]", "b"),
                                                ("fallback_models[2]", "c")))
    assert gateway_refs(GATEWAY_SCHEMA, {"pool": 7}) == GatewayRefs("pool", None, ())
    assert gateway_refs(None, {"pool": "x"}) == GatewayRefs()


HEADERS = {"type": "object", "properties": {
    "headers": {"type": "array", "items": {"type": "string"}, "x-busbar-headers": True},
    "state": {"type": "object", "properties": {
        "headers": {"type": "array", "items": {"type": "string"}, "x-busbar-headers": True}}}}}


def test_header_names_are_the_lower_cased_union_of_every_marked_list() -> None:
    from busbar_sdk.settings_schema import header_faults, header_names

    settings = {"headers": ["X-Tenant", "x-region"], "state": {"headers": ["x-tenant", "X-Tier", "Cookie"]}}
    assert header_names(HEADERS, settings) == ("x-tenant", "x-region", "x-tier")       # never the credential
    assert header_names(json.dumps(HEADERS), {"state": {"headers": ["x-a"]}}) == ("x-a",)
    assert header_names(HEADERS, {}) == () and header_names(None, settings) == ()
    assert header_faults(HEADERS, settings) == [
        ("state.headers[2]", "'Cookie' carries a credential; credentials are never projected to a hook "
                             "(authorization, proxy-authorization, x-api-key, x-goog-api-key, api-key, cookie, "
                             "set-cookie, x-amz-*): remove it")]
    assert header_faults(HEADERS, {"headers": "x-tenant"}) == [
        ("headers", "must be a list of request header names, found str")]
    assert header_faults(HEADERS, {"headers": ["x:y", 3]}) == [
        ("headers[0]", "'x:y' is not a request header name (letters, digits and !#$%&'*+.^_`|~-)"),
        ("headers[1]", "3 is not a request header name (letters, digits and !#$%&'*+.^_`|~-)")]


@pytest.mark.parametrize("name", ["Authorization", "proxy-authorization", "X-API-Key", "x-goog-api-key", "api-key",
                                  "Cookie", "set-cookie", "x-amz-date", "X-Amz-Security-Token"])
def test_every_credential_header_is_refused_in_any_case(name: str) -> None:
    from busbar_sdk.settings_schema import header_faults, header_names, is_credential_header

    assert is_credential_header(name)
    assert header_names(HEADERS, {"headers": [name]}) == ()
    assert [w for w, _ in header_faults(HEADERS, {"headers": [name]})] == ["headers[0]"]


def test_the_rules_hooks_schema_marks_its_header_allowlist() -> None:
    from busbar_sdk.settings_schema import header_names

    schema = (REPO / "plugins" / "busbar-rules-hook" / "src" / "busbar_rules_hook" / "settings_schema.json").read_text()
    assert header_names(schema, {"headers": ["X-Tenant"], "rules": []}) == ("x-tenant",)


def test_cel_texts_are_every_marked_string_by_key_path_and_the_first_party_routers_mark_theirs() -> None:
    from busbar_sdk.settings_schema import cel_texts

    plugins = REPO / "plugins"
    rules = (plugins / "busbar-rules-hook" / "src" / "busbar_rules_hook" / "settings_schema.json").read_text()
    router = (plugins / "busbar-ai-router-hook" / "src" / "busbar_ai_router_hook" / "settings_schema.json").read_text()
    assert cel_texts(rules, {"rules": [{"when": "req.stream", "to": ["a"]}, {"when": 7, "to": ["b"]},
                                       {"when": "", "to": ["c"]}]}) == [("rules[0].when", "req.stream"),
                                                                          ("rules[2].when", "")]
    assert cel_texts(router, {"when": "true", "cache": {"key": "req.pool"}, "candidates": [],
                              "fallback": [{"rules": [{"when": "req.has_tools", "to": ["x"]}]}]}) == [
        ("when", "true"), ("cache.key", "req.pool"), ("fallback[0].rules[0].when", "req.has_tools")]
    assert cel_texts(None, {"when": "x"}) == [] and cel_texts(rules, {}) == []


def test_cel_faults_give_the_plugins_own_lines_and_read_headers_from_the_top_level_allowlist_only() -> None:
    from busbar_sdk.settings_schema import cel_faults

    router = (REPO / "plugins" / "busbar-ai-router-hook" / "src" / "busbar_ai_router_hook" /
              "settings_schema.json").read_text()
    settings = {"candidates": [], "headers": ["X-Tier"], "state": {"headers": ["x-user"]},
                "when": "req.headers['x-tier'] == 'gold'", "cache": {"key": "req.headers['x-user']"},
                "fallback": [{"rules": [{"when": "req.headers['X-Tier'] == 'a'", "to": ["m"]},
                                        {"when": "req.stream &&", "to": ["m"]}]}]}
    assert [(w, t[:40]) for w, t in cel_faults(router, settings)] == [
        ("cache.key", "reads header 'x-user', which settings.he"),       # state.headers is the model's, not CEL's
        ("fallback[0].rules[0].when", "header names in req.headers are lower-ca"),
        ("fallback[0].rules[1].when", "CEL: INVALID_ARGUMENT: ERROR: <input>:1:"),
    ]
    assert cel_faults(router, {"when": "req.headers['x-a'] == 'b'"}) == [
        ("when", "reads req.headers but settings.headers lists no header; only the headers listed there are "
                 "projected")]
    assert cel_faults(router, {"when": "req.stream", "headers": ["x-a"]}) == []
