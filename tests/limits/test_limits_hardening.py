"""Limits that a client cannot talk its way around: multi-choice requests reserve every choice, a
same-protocol stream is charged its usage even when the client did not ask for it (and the
client's stream stays as it asked), a stream with no usage at all is charged its worst case, and a
config reload keeps auto-provisioned groups enforced and refused keys refused. docs/limits.md.
"""
from __future__ import annotations

import signal
from types import SimpleNamespace

import httpx
import openai
import orjson
import pytest
from busbar.config.schema_access import RateCardEntry
from busbar.limits.cost import RateCard
from busbar.limits.estimate import UNCAPPED, choices, lane_prices, output_cap, worst_case
from busbar.proto.openai.usage_ask import UsageStripper

from tests.limits.test_limits_e2e import BASE, PROMPT, _metric, _oa, _openai_body
from tests.limits.test_limits_stores import Gw
from tests.support.gateway import free_port
from tests.support.groupkey import mint_key
from tests.support.waiting import wait_until

PRICES = ((1_000_000, 3_000_000, 4096, UNCAPPED),)     # 1 µ per input token, 3 µ per output token


# -- multi-choice reservations (unit) -------------------------------------------------------------
def test_the_worst_case_multiplies_the_output_cap_by_the_choices_asked_for() -> None:
    assert worst_case({"max_tokens": 100}, 400, PRICES).tokens == 400 + 100
    w = worst_case({"max_tokens": 100, "n": 50}, 400, PRICES)
    assert (w.tokens, w.cost) == (400 + 5000, 400 * 1_000_000 + 5000 * 3_000_000)
    w = worst_case({"generationConfig": {"maxOutputTokens": 10, "candidateCount": 8}}, 40, PRICES)
    assert (w.tokens, w.cost) == (40 + 80, 40 * 1_000_000 + 80 * 3_000_000)
    w = worst_case({"n": 3}, 4, PRICES)                   # no cap in the body: the lane default, per choice
    assert (w.tokens, w.cost) == (4 + 3 * 4096, 4 * 1_000_000 + 3 * 4096 * 3_000_000)


def test_input_is_bounded_by_the_body_bytes_and_each_members_context_window() -> None:
    # a byte-level BPE token holds at least one byte: the body's length bounds its input tokens,
    # whatever the script (3 bytes per CJK character, 4 per emoji, 6 per \\u escape)
    body = orjson.dumps({"max_tokens": 10, "messages": [{"role": "user", "content": "中文🙂"}]})
    w = worst_case(orjson.loads(body), len(body), PRICES)
    assert (w.input, w.output, w.tokens) == (len(body), 10, len(body) + 10)
    members = [SimpleNamespace(lane=SimpleNamespace(name="a", upstream_model=None, default_max_tokens=None),
                               context_max=300),
               SimpleNamespace(lane=SimpleNamespace(name="b", upstream_model=None, default_max_tokens=None),
                               context_max=None)]
    card = RateCard({"a": RateCardEntry(input_utok=5.0, output_utok=1.0),
                     "b": RateCardEntry(input_utok=1.0, output_utok=1.0)})
    prices = lane_prices(members, card, 4096)
    assert prices == ((5_000_000, 1_000_000, 4096, 300), (1_000_000, 1_000_000, 4096, UNCAPPED))
    w = worst_case({"max_tokens": 10}, 1000, prices)      # a's window caps its input at 300 tokens
    assert (w.input, w.tokens, w.cost) == (1000, 1010, max(300 * 5_000_000, 1000 * 1_000_000) + 10 * 1_000_000)


def test_the_output_cap_is_the_largest_spelling_the_body_carries() -> None:
    """The OpenAI reader forwards ``max_completion_tokens`` over ``max_tokens``: a body carrying both
    used to reserve the smaller (``max_tokens: 1``) while the upstream was asked for the larger."""
    assert output_cap({"max_tokens": 1, "max_completion_tokens": 5000}) == 5000
    assert output_cap({"max_completion_tokens": 7, "max_tokens": 70}) == 70
    assert output_cap({"max_output_tokens": 3, "inferenceConfig": {"maxTokens": 30}}) == 30
    assert output_cap({"max_tokens": 1e5}) == 100000                # a JSON 1e5 reads as a float
    assert output_cap({"max_tokens": 0.5}) is output_cap({"max_tokens": "9"}) is output_cap({"max_tokens": True}) \
        is output_cap({"max_tokens": 1e300}) is None
    w = worst_case({"max_tokens": 1, "max_completion_tokens": 100}, 4, PRICES)
    assert (w.tokens, w.cost) == (4 + 100, 4 * 1_000_000 + 100 * 3_000_000)


def test_two_output_caps_cannot_shrink_a_strict_reservation(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  g: { limits: [ { budget: 20000, per: month, strict: true } ] }\n",
                         mock.url, "g")
    client = _oa(gw)
    with pytest.raises(openai.RateLimitError) as exc:    # ~1 025 × 3 µ + 5 000 × 15 µ: over 20 000 µ
        client.chat.completions.create(model="c", max_tokens=1, max_completion_tokens=5000,
                                       messages=[{"role": "user", "content": PROMPT}])
    assert exc.value.status_code == 429
    assert exc.value.body["message"] == "group 'g': budget per month is exhausted (budget 20000)"
    assert mock.requests() == []


def test_choices_reads_every_spelling_and_ignores_nonsense() -> None:
    assert choices({}) == 1
    assert choices({"n": 4}) == 4
    assert choices({"n": 2, "best_of": 5}) == 5
    assert choices({"generation_config": {"candidate_count": 6}}) == 6
    assert choices({"candidateCount": 7}) == 7
    assert choices({"num_generations": 3}) == 3
    assert choices({"n": 0}) == choices({"n": -3}) == choices({"n": "9"}) == choices({"n": True}) == 1


# -- multi-choice reservations (end to end) -------------------------------------------------------
def test_a_request_for_many_choices_reserves_each_of_them(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  g: { limits: [ { budget: 10000, per: month } ] }\n", mock.url, "g")
    mock.script([{"match": {"protocol": "openai"}, "response": {"body": _openai_body(900, 200)}}])
    client = _oa(gw)
    with pytest.raises(openai.RateLimitError) as exc:    # ~1 000 input + 3 × 1 100 × 3 µ: over 10 000 µ
        client.chat.completions.create(model="p", max_tokens=1100, n=3,
                                       messages=[{"role": "user", "content": PROMPT}])
    assert exc.value.status_code == 429
    assert exc.value.body["message"] == "group 'g': budget per month is exhausted (budget 10000)"
    assert mock.requests() == []
    ok = client.chat.completions.create(model="p", max_tokens=1100, n=2,       # ~1 000 + 6 600 µ
                                        messages=[{"role": "user", "content": PROMPT}])
    assert ok.usage is not None and ok.usage.completion_tokens == 200
    assert len(mock.requests()) == 1
    assert _metric(gw, "busbar_limit_spend_micros_total", pool="p", model="gpt") == 1500.0


# -- same-protocol OpenAI streams are charged their usage ---------------------------------------
HEAD = {"id": "chatcmpl-7", "object": "chat.completion.chunk", "created": 1, "model": "gpt"}
CHUNKS = [{**HEAD, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}]},
          {**HEAD, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
USAGE = {"prompt_tokens": 900, "completion_tokens": 200, "total_tokens": 1100}


def _sse(items: list) -> bytes:  # noqa: ANN401 - dicts or the [DONE] marker
    return b"".join(b"data: " + (orjson.dumps(x) if isinstance(x, dict) else x.encode()) + b"\n\n" for x in items)


def _stream(gw, **extra) -> bytes:  # noqa: ANN001, ANN003
    body = {"model": "p", "stream": True, "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}], **extra}
    with httpx.Client(timeout=10, headers=gw.headers) as c, c.stream("POST", gw.url + "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        return r.read()


def test_the_stripper_takes_out_only_what_the_gateway_asked_for() -> None:
    with_usage = [{**c, "usage": None} for c in CHUNKS] + [{**HEAD, "choices": [], "usage": USAGE}, "[DONE]"]
    wire = _sse(with_usage)
    for cut in (1, 7, 40, len(wire) - 3):                   # any chunking of the upstream bytes
        s = UsageStripper()
        assert s.feed(wire[:cut]) + s.feed(wire[cut:]) + s.close() == _sse([*CHUNKS, "[DONE]"])
    s = UsageStripper()                                     # usage on a content chunk: the field goes
    assert s.feed(_sse([{**CHUNKS[1], "usage": USAGE}])) == _sse([CHUNKS[1]])
    assert s.feed(b"data: {\"x\": 1}\n\ndata: [DON") == b"data: {\"x\": 1}\n\n"
    assert s.close() == b"data: [DON"


def test_an_openai_stream_that_did_not_ask_usage_is_charged_and_sees_none(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  g: { limits: [ { tokens: 100000, per: day } ] }\n", mock.url, "g")
    frames = [{**c, "usage": None} for c in CHUNKS] + [{**HEAD, "choices": [], "usage": USAGE}, "[DONE]"]
    mock.script([{"match": {"protocol": "openai"}, "times": 2, "response": {"sse": frames}}])
    assert _stream(gw) == _sse([*CHUNKS, "[DONE]"])        # the stream the client asked for
    sent = mock.requests()[0]["body"]
    assert sent["stream_options"] == {"include_usage": True}
    assert _metric(gw, "busbar_limit_spend_micros_total", pool="p", model="gpt") == 1500.0   # 900 + 200 × 3
    asked = _stream(gw, stream_options={"include_usage": True})
    assert asked == _sse(frames)                           # asked: relayed byte for byte
    assert _metric(gw, "busbar_limit_spend_micros_total", pool="p", model="gpt") == 3000.0


def test_the_official_client_streams_without_usage_and_is_charged(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  g: { limits: [ { budget: 100000, per: day } ] }\n", mock.url, "g")
    client = _oa(gw)
    chunks = list(client.chat.completions.create(model="p", stream=True, messages=[{"role": "user", "content": "hi"}]))
    assert chunks and all(c.usage is None and c.choices for c in chunks)
    assert mock.requests()[0]["body"]["stream_options"] == {"include_usage": True}
    out = _metric(gw, "busbar_limit_tokens_total", pool="p", model="gpt", tier="output")
    asked = list(client.chat.completions.create(model="p", stream=True, stream_options={"include_usage": True},
                                                messages=[{"role": "user", "content": "hi"}]))
    assert asked[-1].choices == [] and asked[-1].usage is not None and asked[-1].usage.completion_tokens > 0
    assert out == float(asked[-1].usage.completion_tokens)     # the same reply, the same charge
    assert _metric(gw, "busbar_limit_tokens_total", pool="p", model="gpt", tier="output") == 2 * out


def test_a_stream_that_never_reports_usage_is_charged_its_worst_case(gateway_factory, mock) -> None:
    gw = gateway_factory(BASE + "groups:\n  g: { limits: [ { tokens: 3900, per: day } ] }\n", mock.url, "g")
    mock.script([{"match": {"protocol": "openai"}, "response": {"sse": [*CHUNKS, "[DONE]"]}}])   # ignores the ask
    raw = orjson.dumps({"model": "p", "stream": True, "max_tokens": 1000,
                        "messages": [{"role": "user", "content": PROMPT}]})
    inp = len(raw)                                            # the documented bound: the body's bytes
    with httpx.Client(timeout=10, headers=gw.headers) as c:
        r = c.post(gw.url + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.content == _sse([*CHUNKS, "[DONE]"])
        assert _metric(gw, "busbar_limit_tokens_total", pool="p", model="gpt", tier="input") == float(inp)
        assert _metric(gw, "busbar_limit_tokens_total", pool="p", model="gpt", tier="output") == 1000.0
        again = c.post(gw.url + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert again.status_code == 429                            # 2 × (inp + 1 000) > 3 900 (inp = 972)
    assert again.json()["error"]["message"] == "group 'g': tokens per day exceeded (limit 3900)"
    assert len(mock.requests()) == 1
    assert "ended without reporting usage; charged its worst case" in gw.logs()


# -- config reloads (end to end, minted keys, auto-provisioned groups) -----------------------------
TEAM = "  team: { child_default: { limits: [ { requests: 1, per: hour } ] } }\n"


def _mint(gw, group: str, parent: str | None = None) -> str:  # noqa: ANN001
    return mint_key(gw.admin, [gw.url], group, **({"parent": parent} if parent else {}))[1]


def _ask(gw, token: str, **extra) -> httpx.Response:  # noqa: ANN001, ANN003
    body = {"model": "p", "messages": [{"role": "user", "content": "hi"}], **extra}
    return httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=10,
                      headers={"authorization": f"Bearer {token}"})


def _still_refused(gw, user1: str, spender: str) -> None:  # noqa: ANN001
    r = _ask(gw, user1)
    assert r.status_code == 429
    assert r.json()["error"]["message"] == "group 'user1': requests per hour exceeded (limit 1)"
    r = _ask(gw, spender, max_tokens=1000)
    assert r.status_code == 429
    assert r.json()["error"]["code"] == "insufficient_quota"
    assert r.json()["error"]["message"] == "group 'g27': budget per month is exhausted (budget 10000)"


def test_a_reload_keeps_refused_keys_refused_and_runtime_groups_enforced(mock, tmp_path) -> None:  # noqa: ANN001
    gw = Gw(tmp_path, mock.url, "", free_port())
    gw.config_path.write_text(gw.config_path.read_text() + TEAM)
    gw.start()
    try:
        user1, spender = _mint(gw, "user1", "team"), _mint(gw, "g27")
        mock.clear()
        assert _ask(gw, user1).status_code == 200
        mock.script([{"match": {"protocol": "openai"}, "times": 1, "response": {"body": _openai_body(900, 3000)}}])
        assert _ask(gw, spender, max_tokens=3000).status_code == 200          # 900 + 9 000 = 9 900 µ spent
        _still_refused(gw, user1, spender)
        assert len(mock.requests()) == 2
        r = gw.admin.post("/config/apply")                                     # unchanged file
        assert (r.status_code, r.json()["applied"], r.json()["config_version"]) == (200, True, 2)
        _still_refused(gw, user1, spender)
        user2 = _mint(gw, "user2", "team")                                    # provisioned after the apply
        assert [_ask(gw, user2).status_code for _ in range(2)] == [200, 429]
        gw.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: gw.admin.get("/config").json()["version"] == 3, timeout=15, what="the SIGHUP apply")
        _still_refused(gw, user1, spender)
        r = _ask(gw, user2)
        assert (r.status_code, r.json()["error"]["message"]) == (
            429, "group 'user2': requests per hour exceeded (limit 1)")
        user3 = _mint(gw, "user3", "team")
        assert [_ask(gw, user3).status_code for _ in range(2)] == [200, 429]
        assert len(mock.requests()) == 4
        assert gw.admin.get("/groups/user1").json()["limits"][0]["used"] == 1
    finally:
        gw.stop()
