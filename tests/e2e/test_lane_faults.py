"""Issue 11 items 5-8 through a real busbar and the mock provider: the lane is the suspect, never the
client (docs/reliability.md "The walk and the first-byte boundary").

- item 5: a stall or a trickle after the headers fails over within ``attempt_timeout_ms`` (a
  non-stream exchange; a stream's time to its first event), bounded by the failover budget; after
  the first byte a silent stream ends with the in-band error at ``limits.upstream_idle_timeout_secs``;
- item 6: a success body is capped while it is read, decoded bytes counted
  (``limits.upstream_body_max_bytes``): a gzip bomb or a huge answer fails over with the gateway's
  memory growth under twice the cap;
- item 7: a 2xx that is not a success (HTML, empty, SSE text, a JSON error, a 204) fails over;
- item 8: a redirect fails over, never followed, never relayed.
"""
from __future__ import annotations

import re
import time

import anthropic
import httpx
import openai
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
limits: { upstream_idle_timeout_secs: 1, stream_keepalive_secs: 0.3, upstream_body_max_bytes: 16777216 }
providers:
  up: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  bad: { provider: up, attempt_timeout_ms: 2000 }
  good: { provider: up }
  nocap: { provider: up }
pools:
  p:
    members: [ { model: bad, weight: 1000 }, { model: good, weight: 1 } ]
    failover: { timeout_secs: 6 }
    breaker: { trip: { mode: consecutive, consecutive_n: 1000 } }
  only-bad:
    members: [ { model: bad } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1000 } }
  budget:
    members: [ { model: nocap, weight: 1000 }, { model: good, weight: 1 } ]
    failover: { timeout_secs: 2 }
    breaker: { trip: { mode: consecutive, consecutive_n: 1000 } }
"""
MSG = [{"role": "user", "content": "hi"}]
CAP = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


def oa(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=30)


def ant(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0, timeout=30)


def bad_once(mock, response: dict, stream: bool | None = None) -> None:
    mock.script([{"match": {"model": "bad", "stream": stream}, "times": 1, "response": response}])


def called(mock) -> list[str]:
    """The lanes the mock was asked for, in order (the body's model, or the path's for path-model protocols)."""
    out = []
    for r in mock.requests():
        body = r.get("body")
        if isinstance(body, dict) and "model" in body:
            out.append(body["model"])
        else:
            out.append(re.search(r"/models?/([\w.-]+?)(?::|/|$)", r["path"]).group(1))
    return out


# ------------------------------------------------------------------------------------------------ item 5

@pytest.mark.parametrize("fault", [{"stall_after": 0}, {"stall_after": 20}, {"trickle_ms": 400}],
                         ids=["stall-after-headers", "stall-mid-body", "trickle"])
def test_a_stalled_non_stream_answer_fails_over_at_attempt_timeout(gw, mock, fault):
    """attempt_timeout_ms 2000 in a pool with failover.timeout_secs 6: the healthy lane's 200 in ~2 s."""
    bad_once(mock, fault)
    t0 = time.monotonic()
    raw = oa(gw).chat.completions.with_raw_response.create(model="p", messages=MSG)
    elapsed = time.monotonic() - t0
    assert raw.status_code == 200
    assert raw.headers["x-busbar-route-target"] == "good"
    assert raw.parse().choices[0].message.content == "Hello from good. You said: hi"
    assert 1.9 <= elapsed < 4.0, elapsed
    assert called(mock) == ["bad", "good"]


@pytest.mark.parametrize("fault", [{"stall_after": 0}, {"trickle_ms": 300}], ids=["stall", "trickle"])
def test_a_stream_with_no_first_event_fails_over_at_attempt_timeout(gw, mock, fault):
    bad_once(mock, fault, stream=True)
    t0 = time.monotonic()
    with oa(gw).chat.completions.with_streaming_response.create(model="p", stream=True, messages=MSG) as resp:
        assert resp.headers["x-busbar-route-target"] == "good"
        chunks = list(resp.parse())
    elapsed = time.monotonic() - t0
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello from good. You said: hi"
    assert 1.9 <= elapsed < 4.0, elapsed


def test_without_attempt_timeout_the_failover_budget_bounds_a_stall(gw, mock):
    """No attempt_timeout_ms: the stall is cut when the pool's 2 s budget runs out (never the 300 s
    upstream_request_timeout_secs), and the answer says so."""
    mock.script([{"match": {"model": "nocap"}, "times": 1, "response": {"stall_after": 0}}])
    t0 = time.monotonic()
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": "budget", "messages": MSG}, timeout=30)
    elapsed = time.monotonic() - t0
    assert r.status_code == 503
    assert r.json()["error"]["message"] == "pool 'budget': failover deadline of 2s exceeded"
    assert r.headers["retry-after"] == "1"
    assert 1.9 <= elapsed < 4.0, elapsed


@pytest.mark.parametrize("ingress", ["openai", "anthropic"])
def test_a_stream_silent_after_its_first_event_ends_with_the_in_band_error(gw, mock, ingress):
    """upstream_idle_timeout_secs 1: two events, then silence; keep-alives (0.3 s) do not keep it
    alive; the client's stream ends with its own protocol's error event, never a clean finish."""
    bad_once(mock, {"stall_after": 2}, stream=True)
    if ingress == "openai":
        path, body = "/v1/chat/completions", {"model": "only-bad", "stream": True, "messages": MSG}
    else:
        path, body = "/v1/messages", {"model": "only-bad", "stream": True, "max_tokens": 50, "messages": MSG}
    t0 = time.monotonic()
    with httpx.stream("POST", gw.url + path, json=body, timeout=30) as r:
        assert r.status_code == 200
        text = r.read().decode()
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 3.0, elapsed
    if ingress == "openai":
        assert text.endswith('data: {"error":{"message":"upstream stream idle for more than 1s",'
                             '"type":"server_error","param":null,"code":null}}\n\n')
        assert ": keep-alive" in text and "[DONE]" not in text
    else:
        assert text.endswith('event: error\ndata: {"type":"error","error":{"type":"api_error",'
                             '"message":"upstream stream idle for more than 1s"}}\n\n')
        assert "event: ping" in text and "message_stop" not in text


# ------------------------------------------------------------------------------------------------ item 6

def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key}")


def _reset_peak(pid: int) -> None:
    """Reset the process's peak RSS (VmHWM) to its current RSS (Linux clear_refs 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


@pytest.mark.parametrize("fault, ingress", [
    ({"body_bytes": 512 << 20, "gzip": True}, "openai"),
    ({"body_bytes": 200 << 20}, "openai"),
    ({"body_bytes": 200 << 20}, "anthropic"),                       # a translated answer
    ({"body_bytes": 200 << 20, "gzip": True, "status": 500}, "openai"),  # an error body
], ids=["gzip-bomb-512MiB", "json-200MiB", "json-200MiB-translated", "error-body-200MiB"])
def test_a_huge_upstream_body_fails_over_with_bounded_memory(gw, mock, fault, ingress):
    """The peak RSS of the busbar process grows by less than twice upstream_body_max_bytes (16 MiB)
    and the client gets the second lane's answer."""
    oa(gw).chat.completions.create(model="good", messages=MSG)      # warm every code path first
    _reset_peak(gw.proc.pid)
    before = _status_kib(gw.proc.pid, "VmRSS")
    bad_once(mock, fault)
    if ingress == "openai":
        raw = oa(gw).chat.completions.with_raw_response.create(model="p", messages=MSG)
        assert raw.parse().choices[0].message.content == "Hello from good. You said: hi"
    else:
        raw = ant(gw).messages.with_raw_response.create(model="p", max_tokens=50, messages=MSG)
        assert raw.parse().content[0].text == "Hello from good. You said: hi"
    assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "good")
    growth = (_status_kib(gw.proc.pid, "VmHWM") - before) * 1024
    assert growth < 2 * CAP, f"peak RSS grew {growth / 2**20:.1f} MiB"


def test_a_stream_without_an_event_in_its_first_cap_bytes_fails_over(gw, mock):
    """40 MiB of event-stream with no event boundary: cut at half of upstream_body_max_bytes before
    the first byte reaches the client (held twice: raw for the relay and in the decoder), so the peak
    RSS grows by less than twice the cap; the healthy lane streams."""
    oa(gw).chat.completions.create(model="good", messages=MSG)
    _reset_peak(gw.proc.pid)
    before = _status_kib(gw.proc.pid, "VmRSS")
    bad_once(mock, {"body_bytes": 40 << 20, "headers": {"content-type": "text/event-stream"}}, stream=True)
    with oa(gw).chat.completions.with_streaming_response.create(model="p", stream=True, messages=MSG) as resp:
        assert resp.headers["x-busbar-route-target"] == "good"
        text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
    assert text == "Hello from good. You said: hi"
    growth = (_status_kib(gw.proc.pid, "VmHWM") - before) * 1024
    assert growth < 2 * CAP, f"peak RSS grew {growth / 2**20:.1f} MiB"
    bad_once(mock, {"body_bytes": 40 << 20, "headers": {"content-type": "text/event-stream"}}, stream=True)
    r = httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                   json={"model": "only-bad", "stream": True, "messages": MSG})
    assert r.status_code == 503
    assert r.json()["error"]["message"] == (
        "all upstream attempts failed; last: upstream answered HTTP 200 with a stream of no event in its "
        "first 8388608 bytes (half of limits.upstream_body_max_bytes)")


def test_an_oversized_body_is_named_when_it_is_the_last_failure(gw, mock):
    bad_once(mock, {"body_bytes": 20 << 20})
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": "only-bad", "messages": MSG}, timeout=30)
    assert r.status_code == 503
    assert r.json()["error"]["message"] == ("all upstream attempts failed; last: upstream answered HTTP 200 "
                                            "with a body over limits.upstream_body_max_bytes (16777216 bytes)")


# ------------------------------------------------------------------------------------------------ item 7

BAD_2XX = [
    ({"body": "<html><body>Sign in to the Wi-Fi</body></html>", "headers": {"content-type": "text/html"}},
     "HTTP 200 with content-type text/html, not JSON"),
    ({"body": "", "headers": {"content-type": "application/json"}}, "HTTP 200 with an empty body"),
    ({"sse": [{"id": "x", "object": "chat.completion.chunk", "choices": []}, "[DONE]"]},
     "HTTP 200 with content-type text/event-stream, not JSON"),
    ({"body": {"error": {"message": "upstream exploded", "type": "server_error"}}},
     "HTTP 200 with an error body"),
    ({"body": {"id": "x", "object": "chat.completion"}},
     "HTTP 200 with a body that is not an answer of protocol openai (no choices list)"),
    ({"status": 204, "body": "", "headers": {"content-type": "application/json"}}, "HTTP 204 with an empty body"),
]
BAD_IDS = ["html", "empty", "sse-text", "json-error", "no-envelope", "204"]


@pytest.mark.parametrize("fault, reason", BAD_2XX, ids=BAD_IDS)
def test_a_bad_2xx_fails_over_on_a_same_protocol_hop(gw, mock, fault, reason):
    bad_once(mock, fault)
    raw = oa(gw).chat.completions.with_raw_response.create(model="p", messages=MSG)
    assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "good")
    assert raw.parse().choices[0].message.content == "Hello from good. You said: hi"
    bad_once(mock, fault)
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": "only-bad", "messages": MSG}, timeout=30)
    assert r.status_code == 503
    assert r.json() == {"error": {"message": f"all upstream attempts failed; last: upstream answered {reason}",
                                  "type": "server_error", "param": None, "code": None}}


@pytest.mark.parametrize("fault, reason", BAD_2XX, ids=BAD_IDS)
def test_a_bad_2xx_never_becomes_an_empty_translated_success(gw, mock, fault, reason):
    bad_once(mock, fault)
    raw = ant(gw).messages.with_raw_response.create(model="p", max_tokens=50, messages=MSG)
    assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "good")
    assert raw.parse().content[0].text == "Hello from good. You said: hi"
    bad_once(mock, fault)
    with pytest.raises(anthropic.APIStatusError) as ei:
        ant(gw).messages.create(model="only-bad", max_tokens=50, messages=MSG)
    assert ei.value.status_code == 503
    assert ei.value.body == {"type": "error", "error": {
        "type": "overloaded_error", "message": f"all upstream attempts failed; last: upstream answered {reason}"}}


@pytest.mark.parametrize("fault, reason", [
    ({"body": {"error": {"message": "no", "type": "server_error"}}},
     "HTTP 200 with content-type application/json to a stream request"),
    ({"sse": []}, "HTTP 200 with a stream that ended before its first event"),
    ({"status": 204, "body": "", "headers": {"content-type": "text/event-stream"}},
     "HTTP 204 with a stream that ended before its first event"),
], ids=["json-error", "empty-stream", "204"])
def test_a_bad_2xx_to_a_stream_request_fails_over(gw, mock, fault, reason):
    bad_once(mock, fault, stream=True)
    with oa(gw).chat.completions.with_streaming_response.create(model="p", stream=True, messages=MSG) as resp:
        assert resp.headers["x-busbar-route-target"] == "good"
        text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
    assert text == "Hello from good. You said: hi"
    bad_once(mock, fault, stream=True)
    r = httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                   json={"model": "only-bad", "stream": True, "messages": MSG})
    assert r.status_code == 503
    assert r.json()["error"]["message"] == f"all upstream attempts failed; last: upstream answered {reason}"


# ------------------------------------------------------------------------------------------------ item 8

@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_fails_over_and_is_never_relayed(gw, mock, status):
    target = "http://169.254.169.254/latest/meta-data/"
    bad_once(mock, {"status": status, "headers": {"location": target}})
    raw = oa(gw).chat.completions.with_raw_response.create(model="p", messages=MSG)
    assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "good")
    assert "location" not in raw.headers
    assert called(mock) == ["bad", "good"]           # never followed: no request to the target
    bad_once(mock, {"status": status, "headers": {"location": target}})
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": "only-bad", "messages": MSG}, timeout=30)
    assert r.status_code == 503
    assert "location" not in r.headers
    assert r.json()["error"]["message"] == (f"all upstream attempts failed; last: upstream answered a redirect "
                                            f"(HTTP {status}); redirects are not followed")


# ------------------------------------------------- item 7 on every same-protocol hop, official SDKs

def _same_protocol_config() -> str:
    from tests.e2e.matrix_clients import PROVIDERS
    lines = ['listen: "127.0.0.1:{port}"', "providers:"]
    lines += [f"  up-{p}: {{ protocol: {p}, base_url: MOCK, api_key: {{ env: KEY_{p.upper()} }} }}" for p in PROVIDERS]
    lines.append("models:")
    for p in PROVIDERS:
        lines += [f"  bad-{p}: {{ provider: up-{p}, default_max_tokens: 64 }}",
                  f"  good-{p}: {{ provider: up-{p}, default_max_tokens: 64 }}"]
    lines.append("pools:")
    lines += [f"  p-{p}: {{ members: [ {{ model: bad-{p}, weight: 1000 }}, {{ model: good-{p} }} ] }}" for p in PROVIDERS]
    return "\n".join(lines) + "\n"


SDK_FOR = {"openai": "openai-chat", "responses": "openai-responses", "anthropic": "anthropic",
           "gemini": "google-genai", "bedrock": "boto3-bedrock", "cohere": "cohere"}
SDK_KEYS = {"KEY_OPENAI": "sk-o", "KEY_RESPONSES": "sk-r", "KEY_ANTHROPIC": "sk-ant-api-a",
            "KEY_GEMINI": "g-key", "KEY_BEDROCK": "AKIDEXAMPLE:secretkey", "KEY_COHERE": "co-key"}


@pytest.fixture(scope="module")
def gw_same(gateway_factory, mock):
    return gateway_factory(_same_protocol_config(), mock.url, env=SDK_KEYS)


@pytest.mark.parametrize("proto", list(SDK_FOR))
def test_the_providers_own_error_envelope_at_200_fails_over_on_a_same_protocol_hop(gw_same, mock, proto):
    """Each protocol's own error body (the matrix's 429 captures) sent with status 200 on a
    same-protocol hop: the official SDK gets the healthy lane's answer, never the error as a success."""
    from tests.e2e.matrix_clients import CLIENTS, PROTOCOL_ERRORS

    _status, body, headers = PROTOCOL_ERRORS[proto]
    mock.script([{"match": {"model": f"bad-{proto}"}, "times": 1,
                  "response": {"status": 200, "body": body, "headers": headers}}])
    assert CLIENTS[SDK_FOR[proto]](gw_same.url).text(f"p-{proto}", "hi") == f"Hello from good-{proto}. You said: hi"
    assert called(mock) == [f"bad-{proto}", f"good-{proto}"]


SMALL_CAP = """
listen: "127.0.0.1:{port}"
limits: { upstream_body_max_bytes: 65536 }
providers:
  up: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  bad: { provider: up }
"""


def test_a_committed_stream_with_an_event_over_the_cap_ends_with_the_in_band_error(gateway_factory, mock):
    """After the first byte, more than upstream_body_max_bytes (64 KiB here) without a decodable event
    ends the client's stream with the in-band error: the decoder's buffer never grows past the cap."""
    gw = gateway_factory(SMALL_CAP, mock.url)
    first = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "bad",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}]}
    bad_once(mock, {"sse": [first, {"raw": "data: " + "a" * 200_000}], "chunk_delay_ms": 100}, stream=True)
    with httpx.stream("POST", gw.url + "/v1/chat/completions", timeout=30,
                      json={"model": "bad", "stream": True, "messages": MSG}) as r:
        assert r.status_code == 200
        text = r.read().decode()
    assert text.startswith('data: {"id":"c"')
    assert text.endswith('data: {"error":{"message":"upstream stream event exceeds limits.upstream_body_max_bytes",'
                         '"type":"server_error","param":null,"code":null}}\n\n')
    assert "a" * 70_000 not in text
