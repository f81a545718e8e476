"""busbar-ai-router-hook ``engine: generative`` end to end: a real busbar process whose AI router asks a
chat model through the same gateway's pool ``router-llms`` (members ``r-small``, ``r-big``), the mock
provider answering the router's calls with scripted JSON (``response.text``) or its default text
(garbage for the router). Good answers order/restrict; garbage is retried, then the next model, then
the fallback chain; a timeout and an empty budget fall back; unknown names are dropped; ``busbar
route --dry-run`` makes the router's call (``--no-model`` does not); configure-time refusals.

Source: docs/router.md#the-generative-engine.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

import httpx
import openai
import pytest

from tests.e2e.test_hooks_e2e import HEAD
from tests.router.test_ai_router_e2e import BIN, _assert_open_refused, _boot
from tests.support.waiting import wait_until

MODELS = """
  m-code: { provider: up-openai }
  m-math: { provider: up-openai }
  m-chat: { provider: up-openai }
  r-small: { provider: up-openai }
  r-big: { provider: up-openai }
"""
CANDIDATES = """
            - { name: code, description: "Programming and source code.", examples: ["Fix this Python function"] }
            - { name: math, description: "Mathematics: equations, calculus, proofs." }
            - { name: m-chat, description: "Casual conversation and small talk." }
"""
MEMBERS = "    members: [ { model: m-code, tags: [code] }, { model: m-math, tags: [math] }, { model: m-chat } ]\n"
GEN = ("          engine: generative\n          gateway_url: \"http://127.0.0.1:{port}\"\n"
       "          pool: router-llms\n          model: r-small\n          fallback_models: [r-big]\n"
       "          retry: { attempts: 2, backoff: 10, max: 40 }\n          instructions: \"Route assistant traffic.\"\n"
       "          cache: { size: 0 }\n          fallback: [ { rules: [], default: [m-chat] } ]\n")


def pool(name: str, extra: str = "", timeout: int = 5000) -> str:
    return (f"  {name}:\n    hooks:\n      - module: busbar-ai-router\n        prompt: ro\n"
            f"        timeout_ms: {timeout + 500}\n        settings:\n          timeout: {timeout}\n{GEN}{extra}"
            f"          candidates:\n{CANDIDATES}{MEMBERS}")


POOLS = "pools:\n" + "".join([
    "  router-llms:\n    members: [ { model: r-small }, { model: r-big } ]\n",
    pool("gen", "          min_confidence: 0.6\n"),
    pool("gen-multi", "          multi: true\n          min_confidence: 0.5\n"),
    pool("gen-slow", timeout=300),
    pool("gen-budget", "          budget: { max_tokens_per_hour: 1 }\n"),
    pool("gen-cached", "          cache: { size: 100, ttl: 600 }\n").replace("          cache: { size: 0 }\n", ""),
    # the router's calls straight at the mock (a loopback listener too), to see what the router sends
    pool("gen-keyed", "          gateway_key: { env: T_ROUTER_KEY }\n").replace("http://127.0.0.1:{port}", "MOCK"),
])
OPT_IN_POOL = pool("gen-opt-in", "          headers: [X-Route-Ai]\n"
                                 "          when: \"'x-route-ai' in req.headers && req.headers['x-route-ai'] == 'yes'\"\n")
HEADERS_POOL = pool("gen-headers", "          state: { headers: [X-Tier, X-Secret], redact: ['$.headers.\"x-secret\"'] }\n")


def answer(destinations: list[str], confidence: float, reason: str = "fits") -> str:
    return json.dumps({"destinations": destinations, "confidence": confidence, "reason": reason})


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, router_plugins):
    _, trust = router_plugins
    cfg = HEAD.replace("models:\n", "models:\n" + MODELS.lstrip("\n")) + trust + POOLS
    cfg += HEADERS_POOL + OPT_IN_POOL
    return gateway_factory(cfg, mock.url, env={"BUSBAR_STATE_FILE": "", "T_ROUTER_KEY": "bbk_router-key"})


def chat(gw, pool_name: str, text: str, **kw) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                      json={"model": pool_name, "messages": [{"role": "user", "content": text}], **kw})


def metric(gw, line_start: str, token: str | None = None) -> list[str]:
    """The ``/metrics`` lines starting with ``line_start``, sorted (``token``: a key, when auth is on)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return sorted(line for line in httpx.get(gw.url + "/metrics", headers=headers).text.splitlines()
                  if line.startswith(line_start))


def metrics_are(gw, line_start: str, expected: list[str], token: str | None = None) -> None:
    """Assert that a scrape shows exactly ``expected`` under ``line_start``, scraping again (up to 5 s)
    while it does not: the kernel leaves a hook instance out of a scrape when its ``status`` does not
    answer within 0.25 s (hooks/metrics.py STATUS_TIMEOUT_S; a loaded machine), so one scrape may miss
    counters the decision already counted (they are counted before the response is sent)."""
    last: list[list[str]] = [[]]

    def shown() -> bool:
        last[0] = metric(gw, line_start, token)
        return last[0] == expected
    try:
        wait_until(shown, timeout=5.0, interval=0.1, what=f"{line_start} == {expected}")
    except AssertionError:
        assert last[0] == expected


def has_metric(gw, line: str, token: str | None = None) -> None:
    """Assert that a scrape shows ``line`` (scraping again while it does not: see :func:`metrics_are`)."""
    wait_until(lambda: line in metric(gw, line.split("{")[0] + "{", token), timeout=5.0, interval=0.1, what=line)


def models_called(mock) -> list[str]:
    return [r["body"]["model"] for r in mock.requests() if isinstance(r["body"], dict)]


def test_a_good_answer_orders_its_destination_first(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "response": {"text": answer(["math", "code"], 0.9, "calculus")}}])
    oa = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    text = "What is the derivative of x^3?"
    raw = oa.chat.completions.with_raw_response.create(model="gen", messages=[{"role": "user", "content": text}])
    assert (raw.headers["x-busbar-route-target"], raw.headers["x-busbar-route-policy"]) == ("m-math",
                                                                                              "busbar-ai-router")
    routed, served = [r["body"] for r in mock.requests()]
    assert (routed["model"], served["model"]) == ("r-small", "m-math")
    assert routed["messages"][1] == {"role": "user", "content": '{"messages":[{"role":"user","text":"' + text + '"}]}'}
    assert routed["messages"][0]["role"] == "system"
    assert routed["messages"][0]["content"].startswith("Route assistant traffic.\n\nChoose the destination(s)")
    assert "- code: Programming and source code. Examples: \"Fix this Python function\"" in routed["messages"][0][
        "content"]
    assert routed["response_format"]["type"] == "json_schema"
    schema = routed["response_format"]["json_schema"]["schema"]
    assert (schema["required"], schema["properties"]["destinations"]["items"]["enum"]) == (
        ["destinations", "confidence", "reason"], ["code", "math", "m-chat"])
    assert (routed["temperature"], routed["max_tokens"]) == (0, 256)


def test_the_router_presents_its_gateway_key(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "response": {"text": answer(["code"], 0.9)}}])
    assert chat(gw, "gen-keyed", "Fix the build").headers["x-busbar-route-target"] == "m-code"
    routed, served = mock.requests()
    assert (routed["body"]["model"], routed["headers"]["authorization"]) == ("r-small", "Bearer bbk_router-key")
    assert (served["body"]["model"], served["headers"]["authorization"]) == ("m-code", "Bearer sk-test-openai")


def test_unknown_names_are_dropped_and_multi_restricts(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "times": -1,
                  "response": {"text": answer(["code", "gpt-9", "m-chat"], 0.8)}}])
    seen = {chat(gw, "gen-multi", f"Write a loop number {i}").headers["x-busbar-route-target"] for i in range(6)}
    assert seen == {"m-code", "m-chat"}
    assert models_called(mock).count("m-math") == 0


def test_garbage_is_retried_then_the_next_model_then_the_fallback_chain(gw, mock) -> None:
    r = chat(gw, "gen", "Tell me about garbage")                       # no script: the mock's text is not JSON
    assert (r.status_code, r.headers["x-busbar-route-target"]) == (200, "m-chat")
    assert models_called(mock) == ["r-small", "r-small", "r-big", "r-big", "m-chat"]
    metrics_are(gw, "busbar_ai_model_fallback_total{", [
        'busbar_ai_model_fallback_total{from="r-small",hook="busbar-ai-router",pool="gen",reason="bad_output",'
        'to="r-big"} 1.0'])
    has_metric(gw, 'busbar_router_fallback_total{from="ai",hook="busbar-ai-router",pool="gen",reason="bad_output",'
                   'to="fallback[0]"} 1.0')
    mock.clear()
    mock.script([{"match": {"model": "r-big"}, "response": {"text": answer(["code"], 0.95)}}])
    r = chat(gw, "gen", "Fix my code please")
    assert r.headers["x-busbar-route-target"] == "m-code"              # r-small garbage twice, r-big answered
    assert models_called(mock) == ["r-small", "r-small", "r-big", "m-code"]
    metrics_are(gw, "busbar_ai_model_fallback_total{", [
        'busbar_ai_model_fallback_total{from="r-small",hook="busbar-ai-router",pool="gen",reason="bad_output",'
        'to="r-big"} 2.0'])


def test_an_upstream_error_moves_to_the_next_model(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "times": -1, "response": {"status": 400}},
                 {"match": {"model": "r-big"}, "response": {"text": answer(["math"], 0.7)}}])
    assert chat(gw, "gen", "Integrate x dx").headers["x-busbar-route-target"] == "m-math"
    assert models_called(mock) == ["r-small", "r-small", "r-big", "m-math"]     # an error is retried
    has_metric(gw, 'busbar_ai_model_fallback_total{from="r-small",hook="busbar-ai-router",pool="gen",reason="error",'
                   'to="r-big"} 1.0')


def test_a_404_is_not_retried_on_that_model(gw, mock) -> None:
    """An unknown model (the gateway passes the upstream's 404 on) is not transient: one call to
    r-small (``retry.attempts`` is 2), then r-big at once. A 401/403 from the gateway itself (the
    router's key): tests/router/test_ai_router_generative_auth_e2e.py; a 5xx stays retried
    (``test_an_upstream_error_moves_to_the_next_model``)."""
    mock.script([{"match": {"model": "r-small"}, "times": -1, "response": {"status": 404}},
                 {"match": {"model": "r-big"}, "response": {"text": answer(["math"], 0.7)}}])
    r = chat(gw, "gen", "Integrate x dx (404)")
    assert r.headers["x-busbar-route-target"] == "m-math"
    assert models_called(mock) == ["r-small", "r-big", "m-math"]
    has_metric(gw, 'busbar_ai_model_fallback_total{from="r-small",hook="busbar-ai-router",pool="gen",'
                   'reason="unknown_model",to="r-big"} 1.0')


def test_low_confidence_goes_down_the_chain(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "response": {"text": answer(["math"], 0.3)}}])
    assert chat(gw, "gen", "Hmm, maybe maths?").headers["x-busbar-route-target"] == "m-chat"
    has_metric(gw, 'busbar_router_fallback_total{from="ai",hook="busbar-ai-router",pool="gen",reason="low_confidence",'
                   'to="fallback[0]"} 1.0')


def test_a_slow_model_times_out_and_the_chain_serves(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "times": -1,
                  "response": {"delay_ms": 5000, "text": answer(["math"], 0.9)}}])
    t0 = time.monotonic()
    r = chat(gw, "gen-slow", "What is 2 + 2?")
    took = time.monotonic() - t0
    assert (r.status_code, r.headers["x-busbar-route-target"]) == (200, "m-chat")
    assert took < 3.0                                                  # timeout: 300 ms, not the mock's 5 s
    has_metric(gw, 'busbar_router_fallback_total{from="ai",hook="busbar-ai-router",pool="gen-slow",reason="timeout",'
                   'to="fallback[0]"} 1.0')


def test_a_cached_decision_makes_no_call(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "response": {"text": answer(["math"], 0.9)}}])
    assert [chat(gw, "gen-cached", "Prove that sqrt(2) is irrational").headers["x-busbar-route-target"]
            for _ in range(3)] == ["m-math"] * 3
    assert models_called(mock) == ["r-small", "m-math", "m-math", "m-math"]
    has_metric(gw, 'busbar_router_cache_hits_total{cache="local",hook="busbar-ai-router",pool="gen-cached"} 2.0')


def test_the_token_budget_counts_the_routers_own_tokens(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "times": -1, "response": {"text": answer(["code"], 0.9)}}])
    assert chat(gw, "gen-budget", "Write a function").headers["x-busbar-route-target"] == "m-code"
    assert chat(gw, "gen-budget", "Write another function").headers["x-busbar-route-target"] == "m-chat"
    assert models_called(mock) == ["r-small", "m-code", "m-chat"]      # over budget: no second router call
    has_metric(gw, 'busbar_router_fallback_total{from="ai",hook="busbar-ai-router",pool="gen-budget",reason="budget",'
                   'to="fallback[0]"} 1.0')


def _dry_run(gw, pool_name: str, *flags: str, as_json: bool = True):  # noqa: ANN202 - a dict, or the text lines
    run = subprocess.run([str(BIN), "route", "--dry-run", "--config", str(gw.config_path), "--pool", pool_name,
                          "--data", json.dumps("Solve x^2 = 9"), *(["--json"] if as_json else []), *flags],
                         capture_output=True, text=True,
                         timeout=120, env={**os.environ, "T_OPENAI_KEY": "k", "T_ANTHROPIC_KEY": "k",
                                           "BUSBAR_LOG": "error", "BUSBAR_STATE_FILE": "", "T_ROUTER_KEY": "bbk_k"})
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout) if as_json else run.stdout.splitlines()


def test_route_dry_run_makes_the_routers_call_and_no_model_skips_it(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "response": {"text": answer(["math", "gpt-9"], 0.85, "algebra")}}])
    out = _dry_run(gw, "gen-multi")
    explain = out["gates"][0]["explain"]
    assert (out["upstream_calls"], out["excluded"], explain["served_by"], explain["model"], explain["lane"]) == (
        1, ["m-code", "m-chat"], "model", "r-small", "r-small")
    assert (explain["destinations"], explain["dropped"], explain["confidence"], explain["reason"]) == (
        ["math"], ["gpt-9"], 0.85, "algebra")
    assert models_called(mock) == ["r-small"]                          # the router's call, nothing else
    mock.clear()
    mock.script([{"match": {"model": "r-small"}, "response": {"text": answer(["code"], 0.7, "a loop")}}])
    lines = _dry_run(gw, "gen", as_json=False)
    assert lines[2] == "  busbar-ai-router (pools.gen.hooks[0]): order [m-code]"
    assert [ln for ln in lines if ln.startswith(("      model:", "      reason:", "      calls:", "walk:"))] == [
        "      model: r-small", "      reason: a loop", "      calls: 1",
        "walk: m-code, m-math, m-chat (members after the ranked ones: SWRR)"]
    assert re.fullmatch(r"decision: \d+ µs; 1 call\(s\) by a generative router through the gateway \(--no-model "
                        r"skips them\); no other upstream call", lines[-1])
    mock.clear()
    out = _dry_run(gw, "gen")                                          # garbage: 2 + 2 calls, then the chain
    explain = out["gates"][0]["explain"]
    assert (out["upstream_calls"], out["order"], explain["served_by"], explain["error"]) == (
        4, ["m-chat"], "fallback[0]", "r-big: not JSON: 'Hello from r-big. You said: {\"messages\":[{\"role\":\"user\",\"text\":\"Solve x^2 = "
        "9\"}]'")
    mock.clear()
    out = _dry_run(gw, "gen-multi", "--no-model")
    assert (out["upstream_calls"], out["order"], out["gates"][0]["explain"]["hops"]) == (
        0, ["m-chat"], [{"from": "ai", "to": "fallback[0]", "reason": "no_model"}])
    assert mock.requests() == []


KERNEL_BAD = """
  own:
    hooks: [ { module: busbar-ai-router, prompt: ro, timeout_ms: 2000, settings: { engine: generative, gateway_url: "http://127.0.0.1:1", pool: own, model: m-code, candidates: [ { name: m-code, description: c }, { name: m-math, description: m } ] } } ]
    members: [ { model: m-code }, { model: m-math } ]
  nopool:
    hooks: [ { module: busbar-ai-router, prompt: ro, timeout_ms: 2000, settings: { engine: generative, gateway_url: "http://127.0.0.1:1", pool: nope, model: m-code, candidates: [ { name: m-code, description: c }, { name: m-math, description: m } ] } } ]
    members: [ { model: m-code }, { model: m-math } ]
  notmember:
    hooks: [ { module: busbar-ai-router, prompt: ro, timeout_ms: 2000, settings: { engine: generative, gateway_url: "http://127.0.0.1:1", pool: router-llms, model: m-code, fallback_models: [r-big, r-huge], candidates: [ { name: m-code, description: c }, { name: m-math, description: m } ] } } ]
    members: [ { model: m-code }, { model: m-math } ]
  router-llms:
    members: [ { model: r-small }, { model: r-big } ]
global_hooks:
  - { module: busbar-ai-router, kind: gate, prompt: ro, timeout_ms: 2000, settings: { engine: generative, gateway_url: "http://127.0.0.1:1", pool: router-llms, model: r-small, candidates: [ { name: m-code, description: c }, { name: m-math, description: m } ] } }
"""


@pytest.mark.parametrize("flags", [(), ("--validate",)])
def test_a_router_that_could_call_itself_or_a_model_outside_its_pool_is_refused(tmp_path, mock, router_plugins,
                                                                                flags) -> None:
    models = "  r-small: { provider: up-openai }\n  r-big: { provider: up-openai }\n"
    code, lines = _boot(tmp_path, mock, router_plugins, "pools:" + KERNEL_BAD, *flags, models=models)
    p = "config.yaml: "
    assert (code, lines) == (2, [
        p + "global_hooks[0].settings.pool: a gate in global_hooks fires on every request, its own calls through "
            "pool 'router-llms' included; attach it to a pool's hooks instead",
        p + "pools.own.hooks[0].settings.pool: 'own' is the pool this gate sits on: its own calls would fire it "
            "again; name another pool",
        p + "pools.nopool.hooks[0].settings.pool: 'nope' is not a configured pool (pools: own, nopool, notmember, "
            "router-llms)",
        p + "pools.notmember.hooks[0].settings.model: 'm-code' is not a member model of pool 'router-llms' "
            "(models: r-small, r-big); name one of them",
        p + "pools.notmember.hooks[0].settings.fallback_models[1]: 'r-huge' is not a member model of pool "
            "'router-llms' (models: r-small, r-big); name one of them",
        "busbar: 5 config error(s); refusing to start"])


PLUGIN_BAD = [
    ("engine: generative, gateway_url: 'https://example.com', pool: router-llms, model: r-small",
     "settings.gateway_url: 'https://example.com' is not this gateway's own listener; use "
     "http(s)://127.0.0.1:<port> (a loopback address: the router's calls go through this gateway's pools)"),
    ("engine: generative, gateway_url: 'http://127.0.0.1:1', pool: router-llms, model: r-small, temperature: 0.1",
     "settings.temperature: not a setting of engine: generative (the generative engine reports one confidence "
     "(no softmax, no runner-up))"),
    ("engine: generative, gateway_url: 'http://127.0.0.1:1', pool: router-llms, model: r-small, "
     "gateway_key: { env: T_ROUTER_KEY_UNSET }",
     "settings.gateway_key: environment variable T_ROUTER_KEY_UNSET is not set or empty"),
    ("engine: generative, gateway_url: 'http://127.0.0.1:1', pool: router-llms",
     "settings.model: required by engine: generative (a member model of settings.pool)"),
    ("pool: router-llms", "settings.pool: not a setting of engine: decision (it configures engine: generative)"),
]


def test_bad_generative_settings_refuse_the_boot_naming_the_setting(tmp_path, mock, router_plugins) -> None:
    pools = "pools:\n  router-llms:\n    members: [ { model: r-small }, { model: r-big } ]\n" + "".join(
        f"  p{i}:\n    hooks: [ {{ module: busbar-ai-router, prompt: ro, timeout_ms: 2000, settings: {{ {s}, "
        f"candidates: [ {{ name: m-code, description: c }}, {{ name: m-math, description: m }} ] }} }} ]\n"
        f"    members: [ {{ model: m-code }}, {{ model: m-math }} ]\n" for i, (s, _) in enumerate(PLUGIN_BAD))
    models = "  r-small: { provider: up-openai }\n  r-big: { provider: up-openai }\n"
    _assert_open_refused(tmp_path, mock, router_plugins, pools, [message for _, message in PLUGIN_BAD], models=models)


def test_state_headers_reach_the_model_as_data(gw, mock) -> None:
    """``state.headers``: the allowlisted headers the request carries join the state the model reads,
    ``redact`` applies to them; the rest never reach the plugin."""
    mock.script([{"match": {"model": "r-small"}, "response": {"text": answer(["code"], 0.9)}}])
    r = httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                   headers={"x-tier": "gold", "x-secret": "s3", "x-other": "no"},
                   json={"model": "gen-headers", "messages": [{"role": "user", "content": "Fix it"}]})
    assert r.headers["x-busbar-route-target"] == "m-code"
    routed = mock.requests()[0]["body"]
    assert routed["messages"][1]["content"] == '{"headers":{"x-tier":"gold"},"messages":[{"role":"user","text":"Fix it"}]}'


def test_a_when_over_an_allowlisted_header_lets_the_sender_opt_in(gw, mock) -> None:
    mock.script([{"match": {"model": "r-small"}, "times": -1, "response": {"text": answer(["math"], 0.9)}}])
    plain = httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                       json={"model": "gen-opt-in", "messages": [{"role": "user", "content": "Integrate x"}]})
    opted = httpx.post(gw.url + "/v1/chat/completions", timeout=30, headers={"X-Route-AI": "yes"},
                       json={"model": "gen-opt-in", "messages": [{"role": "user", "content": "Integrate x"}]})
    assert (plain.headers["x-busbar-route-target"], opted.headers["x-busbar-route-target"]) == ("m-chat", "m-math")
    assert models_called(mock) == ["m-chat", "r-small", "m-math"]      # no model call without the opt-in
    has_metric(gw, 'busbar_router_skipped_total{hook="busbar-ai-router",pool="gen-opt-in",reason="when_false"} 1.0')
