"""busbar-rules-hook end to end: a real busbar process loads the signed tarball, the official openai
SDK and plain HTTP call it, the mock provider answers; plus shadow mode on the same gate.

Source: docs/router.md#busbar-rules-hook, docs/router.md#shadow-mode, docs/hooks.md#what-a-gate-may-answer.
"""
from __future__ import annotations

import os
import subprocess
import sys

import httpx
import openai
import pytest

from tests.e2e.test_hooks_e2e import HEAD
from tests.support.gateway import free_port

RULES = """
pools:
  routed:
    hooks:
      - module: busbar-rules
        prompt: ro
        timeout_ms: 50
        settings:
          match: first
          rules:
            - { when: 'req.has_tools', to: [an-a] }
            - { when: 'req.prompt.contains("python")', to: [code] }
            - { when: 'req.max_tokens >= 4000', to: [an-a, oa-b] }
          default: [oa-b]
    members: [ { model: oa-a, tags: [code] }, { model: oa-b }, { model: an-a } ]
  pinned:
    hooks:
      - module: busbar-rules
        prompt: ro
        timeout_ms: 50
        settings:
          match: all
          rules:
            - { when: 'req.prompt.contains("secret")', to: [an-a] }
            - { when: 'req.prompt.contains("hipaa")', to: [baa] }
    members: [ { model: oa-a }, { model: oa-b, tags: [baa] }, { model: an-a } ]
  tenants:
    hooks:
      - module: busbar-rules
        timeout_ms: 50
        settings:
          headers: [X-Tenant, x-plan]
          rules:
            - { when: "req.headers['x-tenant'] == 'acme'", to: [an-a] }
            - { when: "'x-plan' in req.headers && req.headers['x-plan'] == 'pro'", to: [oa-a] }
          default: [oa-b]
    members: [ { model: oa-a }, { model: oa-b }, { model: an-a } ]
  shadowed:
    hooks:
      - module: busbar-rules
        prompt: ro
        shadow: true
        on_error: reject
        timeout_ms: 50
        settings: { rules: [ { when: 'req.prompt.contains("python")', to: [oa-b] } ], default: [oa-b] }
    members: [ { model: oa-a } , { model: oa-b } ]
"""

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, router_plugins):
    _, trust = router_plugins
    return gateway_factory(HEAD + trust + RULES, mock.url, env={"BUSBAR_STATE_FILE": "", "BUSBAR_LOG": "info"})


def chat(gw, pool: str, text: str = "hello", **kw) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                      json={"model": pool, "messages": [{"role": "user", "content": text}], **kw})


@pytest.mark.parametrize(("text", "extra", "target"), [
    ("call the tool", {"tools": TOOLS}, "an-a"),                    # rule 0
    ("write python please", {}, "oa-a"),                            # rule 1, by tag
    ("a long essay", {"max_tokens": 5000}, "an-a"),                 # rule 2: an-a first
    ("hello", {}, "oa-b"),                                          # default
    ("write python please", {"tools": TOOLS}, "an-a"),              # first holding rule wins
])
def test_first_match_orders_the_holding_rules_members_first(gw, mock, text, extra, target) -> None:
    r = chat(gw, "routed", text, **extra)
    assert r.status_code == 200
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == (target, "busbar-rules")


def test_a_rule_over_a_missing_key_does_not_hold(gw) -> None:
    """No max_tokens on the request: rule 2 cannot be evaluated, so it does not hold (default)."""
    r = chat(gw, "routed", "an essay")
    assert r.headers["x-busbar-route-target"] == "oa-b"


def test_all_match_restricts_to_the_union(gw) -> None:
    seen = {chat(gw, "pinned", "secret hipaa stuff").headers["x-busbar-route-target"] for _ in range(6)}
    assert seen == {"an-a", "oa-b"}                 # model name (implicit model: tag) and tag, never oa-a
    seen = {chat(gw, "pinned", "only hipaa").headers["x-busbar-route-target"] for _ in range(4)}
    assert seen == {"oa-b"}
    seen = {chat(gw, "pinned", "nothing special").headers["x-busbar-route-target"] for _ in range(6)}
    assert seen == {"oa-a", "oa-b", "an-a"}         # no rule, no default: abstain (SWRR)


def test_openai_sdk_through_the_rules(gw) -> None:
    oa = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    raw = oa.chat.completions.with_raw_response.create(
        model="routed", messages=[{"role": "user", "content": "python question"}])
    assert raw.headers["x-busbar-route-target"] == "oa-a"
    assert raw.parse().choices[0].message.content.startswith("Hello from")


@pytest.mark.parametrize(("headers", "target"), [
    ({"X-Tenant": "acme"}, "an-a"),                                 # rule 0: the name arrives in any case
    ({"x-tenant": "acme", "x-plan": "pro"}, "an-a"),                # the first holding rule wins
    ({"x-tenant": "globex", "X-Plan": "pro"}, "oa-a"),              # rule 1
    ({"x-plan": "free"}, "oa-b"),                                   # rule 0 cannot be evaluated: default
    ({}, "oa-b"),
    ({"x-other": "acme", "authorization": "Bearer acme"}, "oa-b"),  # not listed: never projected
])
def test_rules_route_on_allowlisted_request_headers(gw, headers, target) -> None:
    r = httpx.post(gw.url + "/v1/chat/completions", timeout=30, headers=headers,
                   json={"model": "tenants", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == (target, "busbar-rules")


def test_openai_sdk_headers_reach_the_rules(gw) -> None:
    oa = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, default_headers={"X-Tenant": "acme"})
    raw = oa.chat.completions.with_raw_response.create(model="tenants", messages=[{"role": "user", "content": "q"}])
    assert raw.headers["x-busbar-route-target"] == "an-a"
    assert raw.parse().choices[0].message.content.startswith("Hello from")


def test_shadow_gate_is_called_counted_and_not_applied(gw) -> None:
    targets = [chat(gw, "shadowed", "python").headers for _ in range(4)]
    assert {h["x-busbar-route-target"] for h in targets} == {"oa-a", "oa-b"}     # SWRR, not the rule
    assert {h["x-busbar-route-policy"] for h in targets} == {"weighted"}
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'busbar_gate_shadow_verdicts_total{arm="order",gate="busbar-rules"} 4.0' in metrics
    assert "shadow gate 'busbar-rules' (pools.shadowed.hooks[0]) on request" in gw.logs()
    assert "answered {'arm': 'order', 'order': ['oa-b']}; not applied" in gw.logs()


BAD = """
pools:
  p:
    hooks:
      - module: busbar-rules
        settings:
          rules:
            - { when: 'req.has_tools', to: [oa-a] }
            - { when: 'req.total_chars >', to: [oa-a] }
    members: [ { model: oa-a } ]
"""

BAD_MEMBER = """
pools:
  p:
    hooks:
      - { module: busbar-rules, settings: { rules: [ { when: 'true', to: [gpt-9] } ], default: [oa-a, nope] } }
    members: [ { model: oa-a, tags: [fast] } ]
"""

CREDENTIAL_HEADER = """
pools:
  p:
    hooks:
      - { module: busbar-rules, settings: { headers: [x-tenant, Authorization], rules: [] } }
    members: [ { model: oa-a } ]
"""

UNLISTED_HEADER = """
pools:
  p:
    hooks:
      - module: busbar-rules
        settings:
          headers: [x-tenant]
          rules: [ { when: "req.headers['x-tenant'] == 'a'", to: [oa-a] }, { when: "req.headers['X-Tier'] == 'b'", to: [oa-a] } ]
    members: [ { model: oa-a } ]
"""

SHADOW_TAP = """
global_hooks: [ { module: busbar-rules, kind: tap, shadow: true } ]
pools: { p: { members: [ { model: oa-a } ] } }
"""


def _boot_faults(tmp_path, mock, router_plugins, pools: str, *flags: str) -> tuple[int, str]:
    _, trust = router_plugins
    cfg = tmp_path / "config.yaml"
    cfg.write_text((HEAD + trust + pools).replace("MOCK", mock.url).replace("{port}", str(free_port())))
    proc = subprocess.run([sys.executable, "-m", "busbar.cli", "--config", str(cfg), *flags], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "T_OPENAI_KEY": "k", "T_ANTHROPIC_KEY": "k"})
    return proc.returncode, "\n".join(line for line in proc.stderr.splitlines() if not line[:4].isdigit())


@pytest.mark.parametrize("flags", [(), ("--validate",)])
def test_a_bad_cel_expression_refuses_validate_and_the_boot_naming_the_rule(tmp_path, mock, router_plugins,
                                                                          flags) -> None:
    code, err = _boot_faults(tmp_path, mock, router_plugins, BAD, *flags)
    assert code == 2
    assert err.strip().splitlines() == [
        "config.yaml: pools.p.hooks[0].settings.rules[1].when: CEL: INVALID_ARGUMENT: ERROR: <input>:1:18: Syntax "
        "error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, "
        "NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} | req.total_chars > | .................^ [INVALID_ARGUMENT]",
        "busbar: 1 config error(s); refusing to start"]


@pytest.mark.parametrize("flags", [(), ("--validate",)])
def test_a_name_outside_the_pool_refuses_the_boot_and_validate(tmp_path, mock, router_plugins, flags) -> None:
    code, err = _boot_faults(tmp_path, mock, router_plugins, BAD_MEMBER, *flags)
    assert code == 2
    assert err.strip().splitlines() == [
        "config.yaml: pools.p.hooks[0].settings.rules[0].to[0]: 'gpt-9' is not a member of pool 'p' (models: oa-a; "
        "tags: fast); name a member's model or one of its tags",
        "config.yaml: pools.p.hooks[0].settings.default[1]: 'nope' is not a member of pool 'p' (models: oa-a; "
        "tags: fast); name a member's model or one of its tags",
        "busbar: 2 config error(s); refusing to start"]


@pytest.mark.parametrize("flags", [(), ("--validate",)])
def test_a_credential_header_in_the_allowlist_refuses_the_boot(tmp_path, mock, router_plugins, flags) -> None:
    code, err = _boot_faults(tmp_path, mock, router_plugins, CREDENTIAL_HEADER, *flags)
    assert (code, err.strip().splitlines()) == (2, [
        "config.yaml: pools.p.hooks[0].settings.headers[1]: 'Authorization' carries a credential; credentials are "
        "never projected to a hook (authorization, proxy-authorization, x-api-key, x-goog-api-key, api-key, cookie, "
        "set-cookie, x-amz-*): remove it",
        "busbar: 1 config error(s); refusing to start"])


@pytest.mark.parametrize("flags", [(), ("--validate",)])
def test_a_rule_reading_an_unlisted_header_refuses_validate_and_the_boot(tmp_path, mock, router_plugins,
                                                                       flags) -> None:
    code, err = _boot_faults(tmp_path, mock, router_plugins, UNLISTED_HEADER, *flags)
    assert (code, err.strip().splitlines()) == (2, [
        "config.yaml: pools.p.hooks[0].settings.rules[1].when: reads header 'X-Tier', which settings.headers does not "
        "list (x-tenant); add it there",
        "busbar: 1 config error(s); refusing to start"])


def test_shadow_on_a_tap_is_refused(tmp_path, mock, router_plugins) -> None:
    code, err = _boot_faults(tmp_path, mock, router_plugins, SHADOW_TAP, "--validate")
    assert (code, err.strip().splitlines()) == (2, [
        "config.yaml: global_hooks[0].shadow: shadow applies to gates (a tap never decides); remove it, or use "
        "kind: gate",
        "busbar: 1 config error(s); refusing to start"])
