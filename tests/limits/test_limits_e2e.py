"""Limits end to end: a real busbar process, the real mock provider, the official SDKs.

C027 (5 requests at a barrier against $0.0100 with a $0.004 worst case: exactly 2 admitted, 3 get
429 ``insufficient_quota`` without an upstream call), C028 (a chain of requests limits: 2 admitted,
the 3rd refused naming the bucket), C029 (the cost of the Anthropic usage is 54 399 µ through an
Anthropic and an OpenAI client), a race at concurrency 64 against one budget (0 overshoot), the
quota shape per dialect, freeze, shadow limits, the in-flight gauge released by a client
disconnect, and an unpriced ad-hoc model refused before forwarding. docs/limits.md.
"""
from __future__ import annotations

import asyncio
import re
import threading

import anthropic
import httpx
import openai
import orjson
import pytest

from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

BASE = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  an: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  gpt: { provider: oa }
  claude: { provider: an }
pools:
  p: { members: [ { model: gpt } ] }
  c: { members: [ { model: claude } ] }
rate_card:
  gpt: { input_utok: 1.0, output_utok: 3.0 }
  claude: { input_utok: 3.0, output_utok: 15.0, cache_read_utok: 0.3, cache_write_utok: 3.75 }
metrics: { buffer_seconds: 60 }
"""
PROMPT = "x" * 885           # the body is ~1 025 bytes: ~1 025 input tokens reserved, + max_tokens 1000


def _oa(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.url + "/v1", api_key=getattr(gw, "token", "") or "sk-none", max_retries=0)


def _openai_body(prompt: int, completion: int) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def _metric(gw, name: str, **labels: str) -> float:
    text = httpx.get(gw.url + "/metrics", timeout=5, headers=getattr(gw, "headers", {})).text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if m and ",".join(sorted(m.group(1).split(","))) == want:
            return float(m.group(2))
    return 0.0


def _together(n: int, fn):
    barrier = threading.Barrier(n)
    out: list = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = fn()
        except Exception as e:  # noqa: BLE001 - the test inspects each outcome
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def test_c027_exactly_two_of_five_simultaneous_requests_are_admitted(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  g: { limits: [ { budget: 10000, per: month } ] }\n", mock.url, "g")
    mock.script([{"match": {"protocol": "openai"}, "times": 5,
                  "response": {"body": _openai_body(900, 200), "delay_ms": 700}}])   # 900 + 600 = 1 500 µ
    client = _oa(gw)
    outcomes = _together(5, lambda: client.chat.completions.create(
        model="p", max_tokens=1000, messages=[{"role": "user", "content": PROMPT}]))
    ok = [o for o in outcomes if isinstance(o, openai.types.chat.ChatCompletion)]
    refused = [o for o in outcomes if isinstance(o, openai.RateLimitError)]
    assert (len(ok), len(refused)) == (2, 3)
    for e in refused:
        assert e.status_code == 429
        assert e.body["type"] == "insufficient_quota" and e.body["code"] == "insufficient_quota"
        assert e.body["message"] == "group 'g': budget per month is exhausted (budget 10000)"
    assert len(mock.requests()) == 2                      # the refused three never reached the upstream
    assert _metric(gw, "busbar_limit_spend_micros_total", pool="p", model="gpt") == 3000.0
    assert _metric(gw, "busbar_limit_reservations") == 0.0
    assert _metric(gw, "busbar_limit_rejections_total", metric="budget") == 3.0
    mock.script([{"match": {"protocol": "openai"}, "response": {"body": _openai_body(900, 200)}}])
    nxt = client.chat.completions.create(model="p", max_tokens=1000, messages=[{"role": "user", "content": PROMPT}])
    assert nxt.usage is not None and nxt.usage.prompt_tokens == 900          # $0.0070 left: admitted


CHAIN = """groups:
  acme: { limits: [ { requests: 100, per: minute }, { requests: 1000, per: day } ] }
  growth: { parent: acme, limits: [ { requests: 2, per: minute } ] }
  bob: { parent: growth, limits: [ { requests: 10, per: minute } ] }
"""


def test_c028_a_chain_counts_each_request_once(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + CHAIN, mock.url, "bob")
    client = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
    for _ in range(2):
        msg = client.messages.create(model="c", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
        assert msg.content[0].type == "text"
    with pytest.raises(anthropic.RateLimitError) as exc:
        client.messages.create(model="c", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    e = exc.value
    assert e.status_code == 429
    assert e.body == {"type": "error", "error": {"type": "rate_limit_error",
                                                 "message": "group 'growth': requests per minute exceeded (limit 2)"}}
    assert 1 <= int(e.response.headers["retry-after"]) <= 60
    assert len(mock.requests()) == 2
    assert _metric(gw, "busbar_limit_rejections_total", metric="requests") == 1.0


def test_a_spent_budget_answers_in_each_vendors_quota_shape(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  broke: { limits: [ { budget: 0, per: day } ] }\n", mock.url, "broke")
    msg = "group 'broke': budget per day is exhausted (budget 0)"
    r = httpx.post(gw.url + "/v1/chat/completions", headers=gw.headers, json={"model": "p", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 429
    assert r.json() == {"error": {"message": msg, "type": "insufficient_quota", "param": None,
                                  "code": "insufficient_quota"}}
    assert 1 <= int(r.headers["retry-after"]) <= 86400
    r = httpx.post(gw.url + "/model/p/converse", headers=gw.headers, json={"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    assert r.status_code == 400
    assert r.headers["x-amzn-errortype"].startswith("ServiceQuotaExceededException:")
    assert r.json() == {"message": msg}
    r = httpx.post(gw.url + "/v1beta/models/p:generateContent", headers=gw.headers, json={"contents": [{"parts": [{"text": "hi"}]}]})
    assert r.status_code == 429
    assert r.json()["error"]["status"] == "RESOURCE_EXHAUSTED" and r.json()["error"]["message"] == msg
    r = httpx.post(gw.url + "/v1/messages", headers=gw.headers, json={"model": "c", "max_tokens": 8,
                                                   "messages": [{"role": "user", "content": "hi"}]})
    assert (r.status_code, r.json()["error"]) == (429, {"type": "rate_limit_error", "message": msg})
    assert mock.requests() == []


def test_a_frozen_group_is_403_naming_it(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  org: { enabled: false }\n  team: { parent: org }\n", mock.url, "team")
    with pytest.raises(openai.PermissionDeniedError) as exc:
        _oa(gw).chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
    assert exc.value.status_code == 403
    assert exc.value.body["message"] == "group 'org' is frozen (enabled: false)"
    assert mock.requests() == []


def test_race_at_concurrency_64_never_overshoots_one_budget(gateway_factory, mock) -> None:
    # worst case per request: ~1 025 input µ + 1 000 × 3 output µ; 40 250 µ holds exactly 10 of them
    gw = gateway_factory(BASE + "groups:\n  g: { limits: [ { budget: 40250, per: total } ] }\n", mock.url, "g")
    mock.script([{"match": {"protocol": "openai"}, "times": -1,
                  "response": {"body": _openai_body(1000, 1000), "delay_ms": 300}}])   # 4 000 µ each

    async def race() -> list[int]:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=64)) as client:
            body = {"model": "p", "max_tokens": 1000, "messages": [{"role": "user", "content": PROMPT}]}
            rs = await asyncio.gather(*(client.post(gw.url + "/v1/chat/completions", json=body, headers=gw.headers) for _ in range(64)))
            return [r.status_code for r in rs]

    statuses = asyncio.run(race())
    assert statuses.count(200) == 10 and statuses.count(429) == 54
    assert len(mock.requests()) == 10
    spend = _metric(gw, "busbar_limit_spend_micros_total", pool="p", model="gpt")
    assert spend == 40000.0 and spend <= 40250


POOL_U = "  u: { hooks: [ usage ], members: [ { model: gpt } ] }\n"      # one more pool, ranked by usage
CARD_GROUP = """groups:
  g: { limits: [ { budget: 1000000000, per: month }, { requests: 1, per: hour, shadow: true },
                 { requests: 1000, per: day } ] }
"""
C029_USAGE = {"input_tokens": 3, "cache_creation_input_tokens": 12304, "cache_read_input_tokens": 0,
              "output_tokens": 550}


def _anthropic_body() -> dict:
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": C029_USAGE}


def test_c029_cost_through_anthropic_and_openai_clients_and_shadow_limits(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE.replace("rate_card:", POOL_U + "rate_card:") + CARD_GROUP, mock.url, "g")
    mock.script([{"match": {"protocol": "anthropic"}, "times": 2, "response": {"body": _anthropic_body()}}])
    client = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
    msg = client.messages.create(model="c", max_tokens=600, messages=[{"role": "user", "content": "hi"}])
    assert msg.usage.cache_creation_input_tokens == 12304
    spend = _metric(gw, "busbar_limit_spend_micros_total", pool="c", model="claude")
    assert abs(spend / 1e6 - 0.054399) < 1e-9
    chat = _oa(gw).chat.completions.create(model="c", max_tokens=600, messages=[{"role": "user", "content": "hi"}])
    assert chat.usage is not None and chat.usage.prompt_tokens == 12307        # 3 + 12 304 written
    spend2 = _metric(gw, "busbar_limit_spend_micros_total", pool="c", model="claude") - spend
    assert abs(spend2 / 1e6 - 0.054399) < 1e-9
    assert _metric(gw, "busbar_limit_tokens_total", pool="c", model="claude", tier="cache_write") == 24608.0
    # requests: 1 per hour is a shadow limit: both went through, the second was counted
    assert _metric(gw, "busbar_limit_shadow_rejections_total", group="g", metric="requests", window="hour") == 1.0
    assert "shadow limit: group 'g': requests per hour would have refused" in gw.logs()
    # the usage strategy ranks on the caller's chain headroom (requests per day) instead of abstaining
    r = httpx.post(gw.url + "/v1/chat/completions", headers=gw.headers, json={"model": "u", "messages": [{"role": "user", "content": "hi"}]})
    assert (r.status_code, r.headers["x-busbar-route-policy"]) == (200, "usage")


def test_an_unpriced_adhoc_model_is_refused_before_forwarding(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE, mock.url)
    _, token = gw.mint(None, allowed_pools=["an"])           # a key granted the provider's ad-hoc models
    r = httpx.post(gw.url + "/an/mystery-model/v1/messages", headers={"authorization": f"Bearer {token}"},
                   json={"model": "mystery-model", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400
    assert r.json() == {"type": "error", "error": {"type": "invalid_request_error", "message":
                        "model 'mystery-model' has no rate_card entry; an unpriced model is refused while a "
                        "rate card is configured"}}
    assert mock.requests() == []


def test_the_in_flight_gauge_is_released_when_a_stream_client_leaves(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  one: { limits: [ { concurrent: 1 } ] }\n", mock.url, "one")
    mock.script([{"match": {"protocol": "openai"}, "response": {"chunk_delay_ms": 400}}])
    body = {"model": "p", "stream": True, "messages": [{"role": "user", "content": "one two three four five six"}]}
    with httpx.Client(timeout=10, headers=gw.headers) as c, c.stream("POST", gw.url + "/v1/chat/completions", json=body) as first:
        assert first.status_code == 200
        chunks = first.iter_bytes()
        next(chunks)                                     # streaming: the gauge holds the slot
        r = httpx.post(gw.url + "/v1/chat/completions", headers=gw.headers, json={**body, "stream": False})
        assert r.status_code == 429 and "retry-after" not in r.headers
        assert r.json()["error"]["message"] == "group 'one': concurrent exceeded (limit 1)"
    wait_until(lambda: _metric(gw, "busbar_limit_reservations") == 0.0, what="the stream's ticket settled")
    r = httpx.post(gw.url + "/v1/chat/completions", headers=gw.headers, json={**body, "stream": False})
    assert r.status_code == 200


def test_a_client_that_hangs_up_while_the_upstream_answers_is_charged_the_worst_case(gateway_factory, mock) -> None:
    """Refunding it would let a caller spend upstream budget for free by hanging up just before
    the answer: the provider was asked. docs/limits.md#settlement."""
    gw = gateway_factory(BASE + "groups:\n  hang: { limits: [ { budget: 1000000, per: day },"
                                " { requests: 100, per: day } ] }\n", mock.url, "hang")
    mock.script([{"match": {"protocol": "openai"}, "response": {"delay_ms": 1500}}])
    raw = orjson.dumps({"model": "p", "max_tokens": 50, "messages": [{"role": "user", "content": "hello there"}]})
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(gw.url + "/v1/chat/completions", content=raw, timeout=0.5,
                   headers={**gw.headers, "content-type": "application/json"})
    wait_until(lambda: _metric(gw, "busbar_limit_reservations") == 0.0, what="the abandoned request settled")
    limits = {lim["metric"]: lim for lim in gw.admin.get("/groups/hang").json()["limits"]}
    assert (limits["budget"]["used"], limits["budget"]["reserved"]) == (len(raw) * 1 + 50 * 3, 0)
    assert (limits["requests"]["used"], limits["requests"]["reserved"]) == (1, 0)
    wait_until(lambda: len(mock.requests()) == 1, what="the upstream was asked once")


def test_a_live_config_apply_keeps_the_counters_and_the_limits_until_a_restart(gateway_factory, mock) -> None:
    import signal

    gw = gateway_factory(BASE + "groups:\n  g: { limits: [ { requests: 2, per: hour } ] }\n", mock.url, "g",
                         env={"BUSBAR_LOG": "info"})
    body = {"model": "p", "messages": [{"role": "user", "content": "hi"}]}
    assert [httpx.post(gw.url + "/v1/chat/completions", headers=gw.headers, json=body).status_code for _ in range(2)] == [200, 200]
    text = gw.config_path.read_text().replace("requests: 2, per: hour", "requests: 3, per: hour")
    gw.config_path.write_text(text)
    gw.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "version 2 now serving" in gw.logs(), timeout=15, what="the config apply")
    statuses = [httpx.post(gw.url + "/v1/chat/completions", headers=gw.headers, json=body).status_code for _ in range(2)]
    assert statuses == [429, 429]          # the 2 used are kept; a groups change waits for a restart
