"""Limits that a client cannot talk its way around: multi-choice requests reserve every choice, a
same-protocol stream is charged its usage even when the client did not ask for it (and the
client's stream stays as it asked), a stream with no usage at all is charged its worst case, and a
config reload keeps auto-provisioned groups enforced and refused keys refused. docs/limits.md.
"""
from __future__ import annotations

import signal

import httpx
import openai
import pytest
from busbar.limits.estimate import choices, worst_case

from tests.limits.test_limits_e2e import BASE, PROMPT, _metric, _oa, _openai_body
from tests.limits.test_limits_stores import Gw
from tests.support.gateway import free_port
from tests.support.waiting import wait_until

PRICES = ((1_000_000, 3_000_000, 4096),)          # 1 µ per input token, 3 µ per output token


# -- multi-choice reservations (unit) -------------------------------------------------------------
def test_the_worst_case_multiplies_the_output_cap_by_the_choices_asked_for() -> None:
    assert worst_case({"max_tokens": 100}, 400, PRICES).tokens == 200
    w = worst_case({"max_tokens": 100, "n": 50}, 400, PRICES)
    assert (w.tokens, w.cost) == (100 + 5000, 100 * 1_000_000 + 5000 * 3_000_000)
    w = worst_case({"generationConfig": {"maxOutputTokens": 10, "candidateCount": 8}}, 40, PRICES)
    assert (w.tokens, w.cost) == (10 + 80, 10 * 1_000_000 + 80 * 3_000_000)
    w = worst_case({"n": 3}, 4, PRICES)                   # no cap in the body: the lane default, per choice
    assert (w.tokens, w.cost) == (1 + 3 * 4096, 1_000_000 + 3 * 4096 * 3_000_000)


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
    with pytest.raises(openai.RateLimitError) as exc:    # ~1 025 input + 3 × 1 000 × 3 µ: over 10 000 µ
        client.chat.completions.create(model="p", max_tokens=1000, n=3,
                                       messages=[{"role": "user", "content": PROMPT}])
    assert exc.value.status_code == 429
    assert exc.value.body["message"] == "group 'g': budget per month is exhausted (budget 10000)"
    assert mock.requests() == []
    ok = client.chat.completions.create(model="p", max_tokens=1000, n=2,
                                        messages=[{"role": "user", "content": PROMPT}])
    assert ok.usage is not None and ok.usage.completion_tokens == 200
    assert len(mock.requests()) == 1
    assert _metric(gw, "busbar_limit_spend_micros_total", pool="p", model="gpt") == 1500.0


# -- config reloads (end to end, minted keys, auto-provisioned groups) -----------------------------
TEAM = "  team: { child_default: { limits: [ { requests: 1, per: hour } ] } }\n"


def _mint(gw, group: str, parent: str | None = None) -> str:  # noqa: ANN001
    body = {"name": f"k-{group}", "group": group, **({"parent": parent} if parent else {})}
    r = gw.admin.post("/keys", json=body)
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    probe = {"model": "no-such-pool", "messages": [{"role": "user", "content": "hi"}]}     # 404 once known
    wait_until(lambda: httpx.post(gw.url + "/v1/chat/completions", json=probe, timeout=5,
                                  headers={"authorization": f"Bearer {token}"}).status_code == 404,
               what="the minted key synced")
    return token


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
