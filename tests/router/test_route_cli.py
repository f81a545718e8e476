"""``busbar route --dry-run`` and ``busbar hooks test`` as real processes over a config whose pool runs
the signed busbar-rules-hook (plus a shadow copy): exact reports, JSON, exit codes, and no upstream call.

Source: docs/router.md#try-a-route-before-it-goes-live.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_hooks_e2e import HEAD

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "busbar"

POOLS = """
pools:
  smart:
    hooks:
      - module: busbar-rules
        prompt: ro
        timeout_ms: 50
        settings:
          rules:
            - { when: 'req.has_tools', to: [agent] }
            - { when: 'req.prompt.contains("python")', to: [oa-a] }
          default: [an-a]
      - module: busbar-rules
        prompt: ro
        shadow: true
        timeout_ms: 50
        settings: { match: all, rules: [ { when: 'req.total_chars > 5', to: [oa-b] } ] }
    members: [ { model: oa-a }, { model: oa-b, tags: [agent] }, { model: an-a } ]
  tenants:
    hooks: [ { module: busbar-rules, timeout_ms: 50, settings: { headers: [x-tenant], rules: [ { when: "req.headers['x-tenant'] == 'acme'", to: [an-a] } ], default: [oa-b] } } ]
    members: [ { model: oa-a }, { model: oa-b }, { model: an-a } ]
  guarded:
    hooks: [ { module: busbar-rules, timeout_ms: 50, settings: { match: all, rules: [ { when: 'req.stream', to: [none-here] } ] } } ]
    members: [ { model: oa-a, tags: [none-here] }, { model: oa-b } ]
"""

CASES = """
cases:
  - { data: "write python code", expect: [oa-a] }
  - { data: "hello there", expect: [an-a] }
  - { data: "python again", expect: [oa-a] }
  - { data: "tell me a story", expect: [oa-b] }
  - data: { messages: [ { role: user, content: "use the tool" } ], tools: [ { type: function, function: { name: f, parameters: { type: object, properties: {} } } } ] }
    expect: [agent]
"""


@pytest.fixture(scope="module")
def cfg(tmp_path_factory, mock, router_plugins) -> Path:
    _, trust = router_plugins
    d = tmp_path_factory.mktemp("route-cli")
    path = d / "config.yaml"
    path.write_text((HEAD + trust + POOLS).replace("MOCK", mock.url).replace("{port}", "1"))
    (d / "cases.yaml").write_text(CASES)
    (d / "req.json").write_text(json.dumps({"messages": [{"role": "user", "content": "python please"}]}))
    return path


def busbar(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "T_OPENAI_KEY": "k", "T_ANTHROPIC_KEY": "k", "BUSBAR_LOG": "error"}
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120, env=env)


def test_dry_run_prints_every_gate_the_reconcile_and_the_walk(cfg, mock) -> None:
    r = busbar("route", "--dry-run", "--config", str(cfg), "--pool", "smart", "--data", f"@{cfg.parent}/req.json")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:6] == [
        "pool: smart (openai request)",
        "gates:",
        "  busbar-rules (pools.smart.hooks[0]): order [oa-a]",
        "  busbar-rules (pools.smart.hooks[1], shadow: not applied): restrict tags_any [model:oa-b, oa-b]",
        "reconcile: policy busbar-rules; order oa-a; excluded -",
        "walk: oa-a, oa-b, an-a (members after the ranked ones: SWRR)",
    ]
    assert lines[6].startswith("decision: ") and lines[6].endswith(" µs; no upstream call was made")
    assert mock.requests() == []


def test_dry_run_json_and_a_prompt_in_the_anthropic_protocol(cfg, mock) -> None:
    r = busbar("route", "--dry-run", "--config", str(cfg), "--pool", "smart", "--protocol", "anthropic",
               "--data", '"just chatting"', "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["latency_us"] > 0
    del out["latency_us"]
    assert out == {"pool": "smart", "gates": [
        {"gate": "busbar-rules", "path": "pools.smart.hooks[0]", "shadow": False,
         "reply": {"arm": "order", "order": ["an-a"]}},
        {"gate": "busbar-rules", "path": "pools.smart.hooks[1]", "shadow": True,
         "reply": {"arm": "restrict", "tags_any": ["model:oa-b", "oa-b"]}}],
        "reject": None, "policy": "busbar-rules", "order": ["an-a"], "excluded": [],
        "walk": ["an-a", "oa-a", "oa-b"], "upstream_calls": 0}
    assert mock.requests() == []


def test_dry_run_shows_a_restriction_that_empties_as_a_reject(cfg) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True})
    r = busbar("route", "--dry-run", "--config", str(cfg), "--pool", "guarded", "--data", body, "--json")
    out = json.loads(r.stdout)
    assert (out["order"], out["excluded"], out["walk"]) == ([], ["oa-b"], ["oa-a"])
    assert out["gates"][0]["reply"] == {"arm": "restrict", "tags_any": ["model:none-here", "none-here"]}


@pytest.mark.parametrize(("args", "err"), [
    (("--pool", "nope", "--data", '"x"'), "--pool: 'nope' is not a configured pool (pools: smart, tenants, guarded)"),
    (("--pool", "smart", "--protocol", "grpc", "--data", '"x"'),
     "--protocol: 'grpc' is not a protocol (anthropic, bedrock, bedrock-invoke, cohere, gemini, openai, responses)"),
    (("--pool", "smart", "--data", '{"messages": 5}'), "--data: messages: required, must be a list of message objects"),
    (("--pool", "smart", "--data", "[1]"), "--data: a request body (a JSON object) or a prompt (a string), found list"),
    (("--pool", "smart", "--data", '"x"', "--header", "x-tenant acme"), "--header: 'x-tenant acme' must be 'Name: value'"),
])
def test_dry_run_bad_input_is_one_line(cfg, args, err) -> None:
    r = busbar("route", "--dry-run", "--config", str(cfg), *args)
    assert (r.returncode, r.stderr.strip()) == (2, err)


@pytest.mark.parametrize(("headers", "target"), [((), "oa-b"), (("--header", "X-Tenant: acme"), "an-a"),
                                                 (("--header", "x-tenant: globex"), "oa-b")])
def test_dry_run_sends_the_headers_a_rule_reads(cfg, headers, target) -> None:
    r = busbar("route", "--dry-run", "--config", str(cfg), "--pool", "tenants", "--data", '"hi"', "--json", *headers)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["walk"][0], out["upstream_calls"]) == (target, 0)


def test_hooks_test_cases_carry_headers(cfg, tmp_path) -> None:
    cases = tmp_path / "tenants.yaml"
    cases.write_text('cases:\n  - { data: "hi", headers: { X-Tenant: acme }, expect: [an-a] }\n'
                     '  - { data: "hi", expect: [oa-b] }\n')
    r = busbar("hooks", "test", "--config", str(cfg), "--pool", "tenants", "--cases", str(cases), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["accuracy"] == 1.0
    bad = tmp_path / "bad.yaml"
    bad.write_text('cases:\n  - { data: "hi", headers: { x-tenant: 7 }, expect: [an-a] }\n')
    r = busbar("hooks", "test", "--config", str(cfg), "--pool", "tenants", "--cases", str(bad))
    assert (r.returncode, r.stderr.strip()) == (2, f"--cases: {bad}: cases[0].headers: must be a map of header name "
                                                   f"to string value")


def test_hooks_test_reports_and_exits_by_accuracy(cfg) -> None:
    cases = str(cfg.parent / "cases.yaml")
    r = busbar("hooks", "test", "--config", str(cfg), "--pool", "smart", "--cases", cases, "--min-accuracy", "0.8")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "cases: 5  accuracy: 0.8000 (4/5)  min-accuracy: 0.8  ok"
    assert lines[1].startswith("decision latency: p50 ") and " µs  p99 " in lines[1]
    assert lines[2:] == [
        "confusion (rows: expected, columns: predicted):",
        "         agent   an-a   oa-a",
        "agent        1      0      0",
        "an-a         0      1      0",
        "oa-a         0      0      2",
        "oa-b         0      1      0",
        "reliability (ECE 0.2000):",
        "  [0.9, 1.0]  n=5    accuracy 0.800  confidence 1.000",
    ]
    low = busbar("hooks", "test", "--config", str(cfg), "--pool", "smart", "--cases", cases, "--min-accuracy", "0.9",
                 "--json")
    assert low.returncode == 1
    report = json.loads(low.stdout)
    assert (report["accuracy"], report["correct"], report["passed"], report["ece"]) == (0.8, 4, False, 0.2)
    assert report["confusion"]["oa-b"] == {"an-a": 1}


def test_hooks_test_refuses_bad_cases(cfg, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cases:\n  - { data: hi }\n")
    r = busbar("hooks", "test", "--config", str(cfg), "--pool", "smart", "--cases", str(bad))
    assert (r.returncode, r.stderr.strip()) == (
        2, f"--cases: {bad}: cases[0]: needs data: <request or prompt> and expect: [member or tag, ...]")


def test_calibrate_without_a_scoring_router_exits_1(cfg) -> None:
    r = busbar("hooks", "calibrate", "--config", str(cfg), "--pool", "smart", "--cases", str(cfg.parent / "cases.yaml"))
    assert (r.returncode, r.stderr.strip()) == (1, (
        "busbar hooks calibrate: no gate of pool 'smart' reported scores for a case whose expect names one of its "
        "candidates (an AI router with engine: decision does)"))
