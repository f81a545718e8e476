"""The projection a hook is sent, and grants enforced in both directions.

Source: docs/hooks.md#what-a-hook-receives, docs/hooks.md#native-strategies; docs/plugins.md#grants,  (optional fields
absent, not null).
"""
from __future__ import annotations

import json

import pytest
from busbar.hooks.projection import UNBOUNDED_PERMITS

from tests.unit.hooks.conftest import body_of

POOL = """
pools:
  smart:
    hooks: [ { module: g, timeout_ms: 1000 } ]
    members:
      - { model: big, tier: large, tags: [opus], context_max: 200000 }
      - { model: mid, weight: 3 }
      - { model: small }
"""


def abstain(payload, settings):
    return {}


async def test_shape_only_projection_exactly(bed_factory):
    bed = bed_factory(POOL, {"g": abstain})
    bed.gw.lanes["big"].latency_ms = 320.5
    bed.gw.lanes["small"].inflight = 1
    await bed.send("smart", "hello world", headers={"authorization": "Bearer sk-live-secret"})
    (msg,) = bed.seen("g")
    req = msg["request"]
    assert msg["op"] == "decide" and msg["context"] == {}
    assert set(req) == {"request_id", "pool", "ingress_protocol", "message_count", "has_tools", "total_chars",
                        "stream"}                                  # no max_tokens: the caller set none
    assert {k: v for k, v in req.items() if k != "request_id"} == {
        "pool": "smart", "ingress_protocol": "openai", "message_count": 1, "has_tools": False,
        "total_chars": 11, "stream": False}
    assert msg["candidates"] == [
        {"idx": 0, "model": "big", "provider": "oa", "weight": 1, "context_max": 200000, "tier": "large",
         "tags": ["opus"], "cost_per_mtok": 45.0, "latency_ms": 320.5, "available_concurrency": 10},
        {"idx": 1, "model": "mid", "provider": "oa", "weight": 3, "cost_per_mtok": 9.0,
         "available_concurrency": UNBOUNDED_PERMITS},
        {"idx": 2, "model": "small", "provider": "oa", "weight": 1, "cost_per_mtok": 0.375,
         "available_concurrency": 3}]
    assert "null" not in json.dumps(msg)
    assert "sk-live-secret" not in json.dumps(msg)


async def test_candidates_are_the_healthy_members_only(bed_factory):
    cfg = POOL.replace("members:", "failover: { exclusions: [mid] }\n    members:")
    bed = bed_factory(cfg, {"g": abstain})
    bed.gw.pools["smart"].members[2].cell.cooldown_until = 1e12     # small is tripped
    await bed.send("smart")
    assert [c["idx"] for c in bed.seen("g")[0]["candidates"]] == [0]


async def test_max_tokens_tools_and_stream_shape(bed_factory):
    bed = bed_factory(POOL, {"g": abstain})
    body = {"model": "smart", "max_tokens": 8192, "stream": True, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    await bed.send("smart", body=body, stream=True)
    req = bed.seen("g")[0]["request"]
    assert (req["max_tokens"], req["has_tools"], req["stream"]) == (8192, True, True)


ANTHROPIC_BODY = {
    "model": "smart", "max_tokens": 100, "system": [{"type": "text", "text": "Be terse."}],
    "metadata": {"user_id": "end-user-7"},
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "My SSN is 123-45-6789"},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "iVBORw0KGgo="}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "the user shared an SSN", "signature": "sig"},
            {"type": "redacted_thinking", "data": "CIPHERTEXT-BLOB"},
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "found"}]}]},
    ]}


@pytest.mark.parametrize("prompt,user,has_prompt,has_user", [
    ("no", "no", False, False), ("ro", "no", True, False), ("no", "ro", False, True), ("rw", "ro", True, True)])
async def test_grants_outbound(bed_factory, prompt, user, has_prompt, has_user):
    cfg = POOL.replace("{ module: g, timeout_ms: 1000 }",
                       f"{{ module: g, timeout_ms: 1000, prompt: {prompt}, user: {user} }}")
    bed = bed_factory(cfg, {"g": abstain})
    await bed.send("smart", body=ANTHROPIC_BODY, ingress="anthropic", headers={"x-api-key": "sk-ant-secret"})
    (msg,) = bed.seen("g")
    req = msg["request"]
    assert msg["op"] == ("transform" if prompt == "rw" else "decide")
    assert ("messages" in req) is has_prompt and ("system" in req) is has_prompt
    assert ("user" in req) is (has_user and prompt != "rw")      # identity rides decide payloads only
    if has_prompt:
        assert req["system"] == "Be terse."
        assert req["messages"] == [
            {"role": "user", "text": "My SSN is 123-45-6789"},                    # the image is skipped
            {"role": "assistant", "text": "the user shared an SSN\n[busbar:redacted_reasoning]\n{\"q\":\"x\"}"},
            {"role": "user", "text": "found"}]
    if has_user and prompt != "rw":
        assert req["user"] == {"user": "end-user-7"}
    assert req["total_chars"] == len("Be terse.") + len("My SSN is 123-45-6789") + len("the user shared an SSN") + 5
    text = json.dumps(msg)
    assert "CIPHERTEXT-BLOB" not in text and "sk-ant-secret" not in text


async def test_manifest_needs_cap_the_operator_grant(bed_factory):
    cfg = POOL.replace("{ module: g, timeout_ms: 1000 }", "{ module: g, timeout_ms: 1000, prompt: rw, user: ro }")
    bed = bed_factory(cfg, {"g": abstain}, needs={"g": ("ro", "no")})
    await bed.send("smart", "secret text")
    (msg,) = bed.seen("g")
    assert msg["op"] == "decide"                       # effective prompt ro: a decide gate, not a transform
    assert msg["request"]["messages"] == [{"role": "user", "text": "secret text"}]
    assert "user" not in msg["request"]


async def test_grants_inbound_a_rewrite_without_rw_is_never_applied(bed_factory):
    cfg = POOL.replace("{ module: g, timeout_ms: 1000 }",
                       "{ module: g, timeout_ms: 1000, prompt: rw, on_error: reject }")
    bed = bed_factory(cfg, {"g": lambda p, s: {"rewrite": {"messages": [{"role": "user", "content": "evil"}]}}},
                      needs={"g": ("ro", "no")})
    r = await bed.send("smart", "original")
    assert r.status == 503 and r.headers["x-busbar-hook-error"] == "grant"
    assert body_of(r)["error"]["message"] == ("hook 'g' returned a field it was not granted and its on_error is "
                                              "reject; the request was not routed")
    assert bed.upstream == []


async def test_each_gate_gets_its_own_copy(bed_factory):
    cfg = """
pools:
  p:
    hooks:
      - { module: vandal, timeout_ms: 1000, prompt: ro }
      - { module: screen, timeout_ms: 1000, prompt: ro }
    members: [ { model: big }, { model: mid } ]
"""
    def vandal(payload, settings):
        payload["request"]["messages"][0]["text"] = "clean"
        payload["candidates"].clear()
        return {}
    bed = bed_factory(cfg, {"vandal": vandal, "screen": lambda p, s: (
        {"reject": {"status": 451, "message": "pii"}} if "ssn" in p["request"]["messages"][0]["text"] else {})})
    for _ in range(5):
        r = await bed.send("p", "my ssn")
        assert r.status == 451


async def test_identity_projection_reads_the_key_record_never_the_credential(bed_factory):
    from busbar.proto.registry import get_dialect
    from busbar.proxy.engine import forward
    from busbar.proxy.translate import Call

    cfg = POOL.replace("{ module: g, timeout_ms: 1000 }", "{ module: g, timeout_ms: 1000, user: ro }")
    bed = bed_factory(cfg, {"g": abstain})

    class Identity:
        key_id, key_name, secret = "vk_01", "team-a", "sk-credential"

    class IdentifiedCall(Call):
        __slots__ = ("identity",)
    body = {"model": "smart", "user": "u-1", "messages": [{"role": "user", "content": "hi"}]}
    call = IdentifiedCall(get_dialect("openai"), body, json.dumps(body).encode(), False, {}, "smart")
    call.identity = Identity()
    await forward(bed.gw, call, bed.gw.pools["smart"])
    req = bed.seen("g")[0]["request"]
    assert req["user"] == {"key_id": "vk_01", "key_name": "team-a", "user": "u-1"}
    assert "sk-credential" not in json.dumps(bed.seen("g"))


HEADER_SCHEMA = json.dumps({"type": "object", "properties": {
    "headers": {"type": "array", "items": {"type": "string"}, "x-busbar-headers": True},
    "fallback": {"type": "array", "items": {"type": "object", "properties": {
        "headers": {"type": "array", "items": {"type": "string"}, "x-busbar-headers": True}}}}}})


async def test_headers_project_exactly_the_allowlisted_ones_lower_cased(bed_factory):
    cfg = POOL.replace("{ module: g, timeout_ms: 1000 }",
                       "{ module: g, timeout_ms: 1000, settings: { headers: [X-Tenant, x-region, x-absent], "
                       "fallback: [ { headers: [x-tier] } ] } }")
    bed = bed_factory(cfg, {"g": abstain}, schemas={"g": HEADER_SCHEMA})
    assert bed.gw.hooks.facade("g").headers == ("x-tenant", "x-region", "x-absent", "x-tier")
    await bed.send("smart", "hi", headers={"x-tenant": "acme", "x-region": "eu-west", "x-tier": "gold",
                                           "authorization": "Bearer sk-live-secret", "x-other": "no"})
    (msg,) = bed.seen("g")
    assert msg["request"]["headers"] == {"x-tenant": "acme", "x-region": "eu-west", "x-tier": "gold"}
    assert list(msg["request"])[-1] == "headers"                   # wire order: appended last
    await bed.send("smart", "hi")
    assert bed.seen("g")[1]["request"]["headers"] == {}            # listed, none sent: an empty map


async def test_no_allowlist_no_headers_field(bed_factory):
    cfg = POOL.replace("{ module: g, timeout_ms: 1000 }", "{ module: g, timeout_ms: 1000, settings: { headers: [] } }")
    bed = bed_factory(cfg, {"g": abstain}, schemas={"g": HEADER_SCHEMA})
    await bed.send("smart", "hi", headers={"x-tenant": "acme"})
    assert "headers" not in bed.seen("g")[0]["request"]


async def test_a_credential_in_the_allowlist_refuses_the_boot(bed_factory):
    from busbar.hooks.engine import HookBootError

    cfg = POOL.replace("{ module: g, timeout_ms: 1000 }",
                       "{ module: g, timeout_ms: 1000, settings: { headers: [x-tenant, Authorization, 'bad name'], "
                       "fallback: [ { headers: [Cookie, X-Amz-Security-Token] } ] } }")
    with pytest.raises(HookBootError) as e:
        bed_factory(cfg, {"g": abstain}, schemas={"g": HEADER_SCHEMA})
    cred = ("carries a credential; credentials are never projected to a hook (authorization, proxy-authorization, "
            "x-api-key, x-goog-api-key, api-key, cookie, set-cookie, x-amz-*): remove it")
    assert e.value.faults == [
        f"config.yaml: pools.smart.hooks[0].settings.headers[1]: 'Authorization' {cred}",
        "config.yaml: pools.smart.hooks[0].settings.headers[2]: 'bad name' is not a request header name (letters, "
        "digits and !#$%&'*+.^_`|~-)",
        f"config.yaml: pools.smart.hooks[0].settings.fallback[0].headers[0]: 'Cookie' {cred}",
        f"config.yaml: pools.smart.hooks[0].settings.fallback[0].headers[1]: 'X-Amz-Security-Token' {cred}"]
