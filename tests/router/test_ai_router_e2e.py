"""busbar-ai-router-hook (engine: decision) end to end: a real busbar process loads the signed tarball,
the openai SDK and plain HTTP call it, the mock provider answers. Thresholds, when, cache, budget,
the fallback chain and its metrics; configure-time refusals; the shipped example cases scored by
``busbar hooks test``.

Source: docs/router.md#busbar-ai-router-hook, docs/router.md#quick-start.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.test_hooks_e2e import HEAD
from tests.support.gateway import free_port

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin" / "busbar"

MODELS = """
  m-code: { provider: up-openai }
  m-math: { provider: up-openai }
  m-chat: { provider: up-openai }
"""

CANDIDATES = """
            - { name: code, description: "Programming: writing and debugging source code, functions, SQL, compiler errors.", examples: ["Fix this Python function", "Why does my Java code throw an exception?"] }
            - { name: math, description: "Mathematics: equations, derivatives, integrals, proofs, probability.", examples: ["Solve 2x + 3 = 7", "What is the integral of x^2?"] }
            - { name: m-chat, description: "Casual conversation and small talk: greetings, feelings, jokes.", examples: ["Hi, how are you?", "Tell me a joke"] }
"""
MEMBERS = "    members: [ { model: m-code, tags: [code] }, { model: m-math, tags: [math] }, { model: m-chat } ]\n"


def pool(name: str, extra: str = "", hook: str = "", temperature: float = 0.05) -> str:
    return (f"  {name}:\n    hooks:\n      - module: busbar-ai-router\n        prompt: ro\n        timeout_ms: 3000\n"
            f"{hook}        settings:\n          timeout: 2000\n          temperature: {temperature}\n{extra}"
            f"          candidates:\n{CANDIDATES}{MEMBERS}")


POOLS = "pools:\n" + "".join([
    pool("ai"),
    pool("gated", "          when: 'req.message_count > 1'\n"
                  "          fallback:\n"
                  "            - { rules: [ { when: 'req.prompt.contains(\"zzz\")', to: [code] } ] }\n"
                  "            - { rules: [ { when: 'true', to: [m-chat] } ] }\n"),
    pool("unsure", "          min_confidence: 0.99\n          on_low_confidence: [m-chat]\n", temperature=1.0),
    pool("unsure-chain", "          min_confidence: 0.99\n          fallback_on_low_confidence: true\n"
                         "          fallback: [ { rules: [ { when: 'req.stream', to: [code] } ] } ]\n",
         temperature=1.0),
    pool("budgeted", "          budget: { max_calls_per_minute: 1 }\n"
                     "          fallback: [ { rules: [], default: [m-chat] } ]\n"),
    pool("multi", "          multi: true\n          min_confidence: 0.2\n"),
])


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, router_plugins):
    _, trust = router_plugins
    cfg = HEAD.replace("models:\n", "models:\n" + MODELS.lstrip("\n")) + trust + POOLS
    return gateway_factory(cfg, mock.url, env={"BUSBAR_STATE_FILE": ""})


def chat(gw, pool_name: str, text: str, **kw) -> httpx.Response:
    msgs = kw.pop("messages", [{"role": "user", "content": text}])
    return httpx.post(gw.url + "/v1/chat/completions", timeout=30, json={"model": pool_name, "messages": msgs, **kw})


def metric_lines(gw, prefix: str) -> list[str]:
    return sorted(line for line in httpx.get(gw.url + "/metrics").text.splitlines() if line.startswith(prefix))


@pytest.mark.parametrize(("text", "target"), [
    ("What is the derivative of x^3 * sin(x)?", "m-math"),
    ("My Python function raises a TypeError when I pass None, how do I fix the code?", "m-code"),
    ("Hey! How's your day going?", "m-chat"),
])
def test_the_model_orders_the_top_candidate_first(gw, text, target) -> None:
    oa = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    raw = oa.chat.completions.with_raw_response.create(model="ai", messages=[{"role": "user", "content": text}])
    assert (raw.headers["x-busbar-route-target"], raw.headers["x-busbar-route-policy"]) == (target,
                                                                                              "busbar-ai-router")
    assert raw.parse().choices[0].message.content.startswith("Hello from")


def test_when_false_skips_the_model_and_walks_the_chain(gw) -> None:
    r = chat(gw, "gated", "Solve 2x = 4")                     # one message: when is false
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("m-chat", "busbar-ai-router")
    two = [{"role": "user", "content": "Solve 2x = 4"}, {"role": "assistant", "content": "x = 2"},
           {"role": "user", "content": "What is the integral of x^2 from 0 to 3?"}]
    assert chat(gw, "gated", "", messages=two).headers["x-busbar-route-target"] == "m-math"
    hops = metric_lines(gw, "busbar_router_fallback_total{")
    assert ('busbar_router_fallback_total{from="ai",hook="busbar-ai-router",pool="gated",reason="when_false",'
            'to="fallback[0]"} 1.0') in hops
    assert ('busbar_router_fallback_total{from="fallback[0]",hook="busbar-ai-router",pool="gated",'
            'reason="no_choice",to="fallback[1]"} 1.0') in hops
    assert ('busbar_router_skipped_total{hook="busbar-ai-router",pool="gated",reason="when_false"} 1.0'
            in metric_lines(gw, "busbar_router_skipped_total{"))


def test_low_confidence_goes_to_on_low_confidence_or_down_the_chain(gw) -> None:
    assert chat(gw, "unsure", "What is the integral of x^2?").headers["x-busbar-route-target"] == "m-chat"
    r = chat(gw, "unsure-chain", "What is the integral of x^2?", stream=True)
    assert r.headers["x-busbar-route-target"] == "m-code"           # fallback[0]: req.stream
    chat(gw, "unsure-chain", "What is the integral of x^2?")      # fallback[0] chooses nothing: SWRR
    hops = metric_lines(gw, 'busbar_router_fallback_total{from="')
    assert ('busbar_router_fallback_total{from="ai",hook="busbar-ai-router",pool="unsure-chain",'
            'reason="low_confidence",to="fallback[0]"} 2.0') in hops
    assert ('busbar_router_fallback_total{from="fallback[0]",hook="busbar-ai-router",pool="unsure-chain",'
            'reason="no_choice",to="swrr"} 1.0') in hops


def test_cache_hits_spend_no_budget_and_an_empty_budget_falls_back(gw) -> None:
    same = "Solve x^2 - 5x + 6 = 0 please"
    assert [chat(gw, "budgeted", same).headers["x-busbar-route-target"] for _ in range(3)] == ["m-math"] * 3
    assert chat(gw, "budgeted", "Another equation: 3x = 9").headers["x-busbar-route-target"] == "m-chat"
    assert ('busbar_router_fallback_total{from="ai",hook="busbar-ai-router",pool="budgeted",reason="budget",'
            'to="fallback[0]"} 1.0') in metric_lines(gw, "busbar_router_fallback_total{")
    assert ('busbar_router_cache_hits_total{cache="local",hook="busbar-ai-router",pool="budgeted"} 2.0'
            in metric_lines(gw, "busbar_router_cache_hits_total{"))


def test_multi_restricts_to_every_candidate_over_min_confidence(gw) -> None:
    seen = {chat(gw, "multi", "What is the integral of x^2?").headers["x-busbar-route-target"] for _ in range(4)}
    assert seen == {"m-math"}


def test_decision_latency_is_reported(gw) -> None:
    chat(gw, "ai", "hello there")
    lines = metric_lines(gw, "busbar_router_decision_latency_us{")
    assert [re.sub(r" [0-9.e+]+$", "", line) for line in lines] == [
        'busbar_router_decision_latency_us{hook="busbar-ai-router",quantile="0.5"}',
        'busbar_router_decision_latency_us{hook="busbar-ai-router",quantile="0.99"}']


BAD = """
pools:
  p:
    hooks:
      - module: busbar-ai-router
        prompt: ro
        timeout_ms: 50
        settings:
          timeout: 100
          candidates:
            - { name: m-code, description: "code" }
            - { name: gpt-9, description: "made up" }
    members: [ { model: m-code } ]
"""


def _boot(tmp_path, mock, router_plugins, pools: str, *flags: str, models: str = "") -> tuple[int, list[str]]:
    _, trust = router_plugins
    cfg = tmp_path / "config.yaml"
    text = HEAD.replace("models:\n", "models:\n" + MODELS.lstrip("\n") + models) + trust + pools
    cfg.write_text(text.replace("MOCK", mock.url).replace("{port}", str(free_port())))
    proc = subprocess.run([str(BIN), "--config", str(cfg), *flags], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "T_OPENAI_KEY": "k", "T_ANTHROPIC_KEY": "k", "BUSBAR_LOG": "error"})
    return proc.returncode, [line for line in proc.stderr.splitlines() if not line[:4].isdigit()]


def _assert_open_refused(tmp_path, mock, router_plugins, pools: str, messages: list[str], models: str = "") -> None:
    """Booting ``pools`` exits 2 with one line per instance ``p<i>`` whose ``busbar_open`` refused its
    settings with ``messages[i]``, then the count line."""
    code, lines = _boot(tmp_path, mock, router_plugins, pools, models=models)
    plugdir, _ = router_plugins
    assert code == 2
    assert lines == [f"config.yaml: pools.p{i}.hooks[0]: {plugdir}/busbar-ai-router-hook-1.5.0.tar.gz: busbar_open "
                     f"raised ValueError: busbar-ai-router-hook: {message}" for i, message in enumerate(messages)
                     ] + [f"busbar: {len(messages)} start-up error(s); refusing to start"]


@pytest.mark.parametrize("flags", [(), ("--validate",)])
def test_a_candidate_outside_the_pool_and_a_short_timeout_ms_are_refused(tmp_path, mock, router_plugins, flags):
    code, lines = _boot(tmp_path, mock, router_plugins, BAD, *flags)
    assert (code, lines) == (2, [
        "config.yaml: pools.p.hooks[0].settings.candidates[1].name: 'gpt-9' is not a member of pool 'p' (models: "
        "m-code; tags: none); name a member's model or one of its tags",
        "config.yaml: pools.p.hooks[0].timeout_ms: 50 ms is below settings.timeout (100 ms): the gate's deadline must "
        "cover the plugin's own time budget; set timeout_ms to at least 100 or lower settings.timeout",
        "busbar: 2 config error(s); refusing to start"])


GOOD_BUT = """
  p{i}:
    hooks:
      - module: busbar-ai-router
        prompt: ro
        timeout_ms: 500
        settings:
          timeout: 100
          {setting}
          candidates: [ {{ name: m-code, description: code }}, {{ name: m-math, description: math }} ]
    members: [ {{ model: m-code }}, {{ model: m-math }} ]
"""

BAD_SETTINGS = [
    ("state: { redact: ['$.messages[[0'] }", "settings.state.redact[0]: '$.messages[[0' is not a JSONPath: Parse "
                                             "error at 1:11 near token [ ([)"),
]


def test_bad_settings_refuse_the_boot_naming_the_setting(tmp_path, mock, router_plugins) -> None:
    """One boot, one line per faulty instance (every instance is opened before the boot gives up)."""
    pools = "pools:\n" + "".join(GOOD_BUT.format(i=i, setting=s).lstrip("\n") for i, (s, _) in enumerate(BAD_SETTINGS))
    _assert_open_refused(tmp_path, mock, router_plugins, pools, [message for _, message in BAD_SETTINGS])


SCHEMA_BAD = [
    ("engine: bogus", "settings.engine: 'bogus' is not one of decision, generative"),
    ("budget: { max_calls_per_minute: 9007199254740993 }",
     "settings.budget.max_calls_per_minute: must be <= 9007199254740992"),
    ("temprature: 0.1", "settings.temprature: unknown setting for busbar-ai-router (it takes budget, cache, candidates, "
                        "engine, fallback, fallback_models, fallback_on_low_confidence, gateway_key, gateway_url, "
                        "headers, instructions, min_confidence, min_margin, model, multi, on_low_confidence, pool, "
                        "retry, state, temperature, timeout, when)"),
    ("min_confidence: 2\n          multi: 'yes'",
     "settings.min_confidence: must be <= 1\nconfig.yaml: pools.p3.hooks[0].settings.multi: expected a boolean, got str"),
    ("cache: { ttl: -1, size: 'big' }",
     "settings.cache.size: expected an integer, got str\nconfig.yaml: pools.p4.hooks[0].settings.cache.ttl: must be >= 0"),
    ("temperature: 500\n          cache: { ttl: 99999999, size: 2000.0 }",
     "settings.cache.size: expected an integer, got float\nconfig.yaml: pools.p5.hooks[0].settings.cache.ttl: must be "
     "<= 2592000\nconfig.yaml: pools.p5.hooks[0].settings.temperature: must be <= 100"),
    ("fallback: [ { rules: [ { when: 'true' } ], default: [] } ]",
     "settings.fallback[0].default: must list at least 1 item(s)\nconfig.yaml: pools.p6.hooks[0].settings.fallback[0]."
     "rules[0].to: required"),
]


@pytest.mark.parametrize("flags", [(), ("--validate",)])
def test_settings_outside_the_plugins_schema_are_refused_by_validate_and_boot_alike(
        tmp_path, mock, router_plugins, flags) -> None:
    """The kernel judges every instance's settings by the plugin's signed settings schema before any
    plugin is opened: the same lines from --validate and the boot, all of them in one run."""
    pools = "pools:\n" + "".join(GOOD_BUT.format(i=i, setting=s).lstrip("\n") for i, (s, _) in enumerate(SCHEMA_BAD))
    code, lines = _boot(tmp_path, mock, router_plugins, pools, *flags)
    expected = "\n".join(f"config.yaml: pools.p{i}.hooks[0].{m}" for i, (_, m) in enumerate(SCHEMA_BAD)).splitlines()
    assert (code, lines) == (2, expected + [f"busbar: {len(expected)} config error(s); refusing to start"])


_CEL_EOF = ("CEL: INVALID_ARGUMENT: ERROR: <input>:1:14: Syntax error: mismatched input '<EOF>' expecting {'[', '{', "
            "'(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} | "
            "req.stream && | .............^ [INVALID_ARGUMENT]")


@pytest.mark.parametrize("flags", [(), ("--validate",)])
def test_every_cel_setting_that_does_not_compile_is_refused_by_validate_and_boot_alike(
        tmp_path, mock, router_plugins, flags) -> None:
    """when, cache.key and a fallback rule's when are x-busbar-cel settings: the kernel compiles them
    before any plugin is opened, so --validate refuses what the boot would, with the same lines."""
    pools = "pools:\n" + "".join(GOOD_BUT.format(i=i, setting=s).lstrip("\n") for i, s in enumerate([
        "when: 'req.stream &&'",
        "cache: { key: 'req.stream &&' }",
        "fallback: [ { rules: [ { when: 'req.has_tools', to: [m-code] }, { when: 'req.stream &&', to: [m-math] } ] } ]",
        "when: 'req.stream'",
    ]))
    code, lines = _boot(tmp_path, mock, router_plugins, pools, *flags)
    assert (code, lines) == (2, [
        f"config.yaml: pools.p0.hooks[0].settings.when: {_CEL_EOF}",
        f"config.yaml: pools.p1.hooks[0].settings.cache.key: {_CEL_EOF}",
        f"config.yaml: pools.p2.hooks[0].settings.fallback[0].rules[1].when: {_CEL_EOF}",
        "busbar: 3 config error(s); refusing to start"])


def test_the_shipped_example_cases_through_hooks_test_and_route(tmp_path, router_plugins) -> None:
    _, trust = router_plugins
    text = (REPO / "examples" / "router" / "config.yaml").read_text()
    text = text.replace("plugins: { enabled: true, dir: dist/plugins }\n", trust)
    # a loaded CI host must not turn a slow decision into a fallback: exact figures need the model's answer
    text = text.replace("timeout_ms: 200 ", "timeout_ms: 20000 ").replace("timeout: 100 ", "timeout: 15000 ")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    env = {**os.environ, "MOCK_OPENAI_KEY": "x", "BUSBAR_LOG": "error"}
    run = subprocess.run([str(BIN), "hooks", "test", "--config", str(cfg), "--pool", "assistants", "--cases",
                          str(REPO / "examples" / "router" / "cases.yaml"), "--min-accuracy", "0.8", "--json"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert (report["cases"], report["correct"], report["accuracy"], report["passed"]) == (220, 183, 0.8318, True)
    assert report["ece"] < 0.08
    dry = subprocess.run([str(BIN), "route", "--dry-run", "--config", str(cfg), "--pool", "assistants", "--data",
                          f"@{REPO}/examples/router/req.json", "--json"], capture_output=True, text=True, timeout=120,
                         env=env)
    out = json.loads(dry.stdout)
    explain = out["gates"][0]["explain"]
    assert (out["order"][0], explain["served_by"], explain["model"], explain["cached"]) == (
        "m-math", "model", "wordllama/l2_supercat_256", False)
    assert next(iter(explain["probabilities"])) == "math" and explain["confidence"] > 0.9
    assert explain["verdict"].startswith("top math ") and explain["temperature"] == 0.04325
    nomodel = subprocess.run([str(BIN), "route", "--dry-run", "--no-model", "--config", str(cfg), "--pool",
                              "assistants", "--data", f"@{REPO}/examples/router/req.json", "--json"],
                             capture_output=True, text=True, timeout=120, env=env)
    out = json.loads(nomodel.stdout)
    assert out["gates"][0]["explain"]["hops"] == [{"from": "ai", "to": "fallback[0]", "reason": "no_model"}]
    assert (out["order"], out["gates"][0]["explain"]["served_by"]) == (["m-math"], "fallback[0]")


def test_calibrate_fits_and_writes_the_temperature(tmp_path, router_plugins) -> None:
    import yaml

    _, trust = router_plugins
    text = (REPO / "examples" / "router" / "config.yaml").read_text()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text.replace("plugins: { enabled: true, dir: dist/plugins }\n", trust))
    cases = yaml.safe_load((REPO / "examples" / "router" / "cases.yaml").read_text())["cases"][:40]
    (tmp_path / "cases.yaml").write_text(yaml.safe_dump({"cases": cases}))
    env = {**os.environ, "MOCK_OPENAI_KEY": "x", "BUSBAR_LOG": "error"}
    run = subprocess.run([str(BIN), "hooks", "calibrate", "--config", str(cfg), "--pool", "assistants", "--cases",
                          str(tmp_path / "cases.yaml"), "--write"], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.splitlines()
    fitted = float(re.fullmatch(r"pools\.assistants\.hooks\[0\]\.settings\.temperature: ([0-9.]+) \(fitted on 40 "
                                r"case\(s\)\)", first).group(1))
    assert 0.01 < fitted < 0.2 and second == f"written to {cfg}"
    doc = yaml.safe_load(cfg.read_text())
    assert doc["pools"]["assistants"]["hooks"][0]["settings"]["temperature"] == fitted
    shadowed = subprocess.run([str(BIN), "hooks", "calibrate", "--config", str(cfg), "--pool", "assistants-rules",
                               "--cases", str(tmp_path / "cases.yaml")], capture_output=True, text=True, timeout=300,
                              env=env)
    assert shadowed.returncode == 0, shadowed.stderr      # a router in shadow is calibrated before it goes live
    assert shadowed.stdout.startswith("pools.assistants-rules.hooks[1].settings.temperature: ")
