"""C046: Responses state goes to the pool member that issued it (issue 11 item 25).

A real busbar in front of the mock provider, a pool of two Responses members under different
accounts (member A: base path ``/org-a``, key ``sk-org-a``; member B: ``/org-b``, ``sk-org-b``); the
mock refuses another account's ``encrypted_content`` (400 ``invalid_encrypted_content``) and
``previous_response_id`` (404 ``previous_response_not_found``) as the real API does. The client is
the official openai SDK's Responses API. See docs/protocols/responses.md#state-routing.
"""
from __future__ import annotations

from typing import Any

import openai
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  acct-a: { protocol: responses, base_url: "MOCK/org-a", api_key: { env: T_KEY_A } }
  acct-b: { protocol: responses, base_url: "MOCK/org-b", api_key: { env: T_KEY_B } }
models:
  ra: { provider: acct-a, upstream_model: gpt-5-mini }
  rb: { provider: acct-b, upstream_model: gpt-5-mini }
pools:
  reason:
    breaker: { trip: { mode: consecutive, consecutive_n: 1 } }
    members: [ { model: ra }, { model: rb } ]
"""
ENV = {"T_KEY_A": "sk-org-a", "T_KEY_B": "sk-org-b", "BUSBAR_STATE_FILE": ""}


@pytest.fixture()
def replicas(gateway_factory, mock) -> tuple[Any, Any]:
    """Two gateway replicas with the same config (fresh per test: the breaker and SWRR start clean)."""
    return gateway_factory(CONFIG, mock.url, env=ENV), gateway_factory(CONFIG, mock.url, env=ENV)


def sdk(gw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)


def sent(mock: Any, org: str) -> list[dict[str, Any]]:
    return [r for r in mock.requests() if r["path"].startswith(f"/{org}/")]


def turn1(client: openai.OpenAI, **kw: Any) -> Any:
    raw = client.responses.with_raw_response.create(model="reason", input="Plan a trip to Lisbon.", **kw)
    assert raw.headers["x-busbar-route-target"] == "ra"          # SWRR: A first
    return raw.parse()


def encrypted_turn1(client: openai.OpenAI) -> tuple[Any, list[dict[str, Any]]]:
    first = turn1(client, store=False, include=["reasoning.encrypted_content"], reasoning={"effort": "low"})
    thought, message = first.output
    assert thought.type == "reasoning" and thought.encrypted_content.startswith("gAAAAAB")
    assert [s.text for s in thought.summary] == ["Considering: Plan a trip to Lisbon."]
    replay = [{"role": "user", "content": "Plan a trip to Lisbon."},
              thought.model_dump(exclude_none=True),
              {"role": "assistant", "content": message.content[0].text},
              {"role": "user", "content": "And for three days?"}]
    return first, replay


def turn2(client: openai.OpenAI, **kw: Any) -> Any:
    return client.responses.with_raw_response.create(model="reason", store=False,
                                                     include=["reasoning.encrypted_content"], **kw)


def test_c046a_encrypted_reasoning_goes_back_to_its_issuer(replicas, mock):
    gw, _ = replicas
    client = sdk(gw)
    _, replay = encrypted_turn1(client)
    for _ in range(2):                                            # SWRR alone would alternate to B
        raw = turn2(client, input=replay)
        assert raw.status_code == 200
        assert raw.headers["x-busbar-route-target"] == "ra"
        assert "x-busbar-translation-dropped" not in raw.headers
    assert raw.parse().output_text == "Hello from gpt-5-mini. You said: And for three days?"
    assert sent(mock, "org-b") == []
    assert len(sent(mock, "org-a")) == 3


def test_c046b_issuer_down_sends_once_to_the_other_member_stripped(replicas, mock):
    gw, _ = replicas
    client = sdk(gw)
    _, replay = encrypted_turn1(client)
    mock.script([{"match": {"path_prefix": "/org-a/"}, "times": 1, "response": {"status": 500}}])
    raw = turn2(client, input=replay)                 # A fails (its breaker trips): stripped, once to B
    assert raw.status_code == 200
    assert raw.headers["x-busbar-route-target"] == "rb"
    assert raw.headers["x-busbar-translation-dropped"] == "encrypted_content"
    (to_b,) = sent(mock, "org-b")
    assert to_b["body"]["input"][1] == {"id": replay[1]["id"], "type": "reasoning",
                                        "summary": [{"type": "summary_text",
                                                     "text": "Considering: Plan a trip to Lisbon."}]}
    raw = turn2(client, input=replay)                 # A's breaker is open: straight to B, stripped
    assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "rb")
    assert raw.headers["x-busbar-translation-dropped"] == "encrypted_content"
    assert len(sent(mock, "org-a")) == 2 and len(sent(mock, "org-b")) == 2


def test_c046b_an_item_with_nothing_but_the_blob_is_dropped(replicas, mock):
    gw, _ = replicas
    client = sdk(gw)
    _, replay = encrypted_turn1(client)
    replay[1] = {k: v for k, v in replay[1].items() if k != "summary"} | {"summary": []}
    mock.script([{"match": {"path_prefix": "/org-a/"}, "times": 1, "response": {"status": 503}}])
    raw = turn2(client, input=replay)
    assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "rb")
    (to_b,) = sent(mock, "org-b")
    assert [it.get("type", "message") for it in to_b["body"]["input"]] == ["message", "message", "message"]


def test_c046_unknown_issuer_strips_and_retries_once_on_the_refusing_member(replicas, mock):
    """Another replica never saw turn 1: B refuses the blob; the same member gets it once more,
    stripped (not a failover hop, and its breaker is not charged: the next request still reaches it)."""
    gw, other = replicas
    _, replay = encrypted_turn1(sdk(gw))
    client = sdk(other)
    assert client.responses.with_raw_response.create(model="reason", input="hi").headers[
        "x-busbar-route-target"] == "ra"                      # SWRR: B is next on this replica
    raw = turn2(client, input=replay)
    assert raw.status_code == 200
    assert raw.headers["x-busbar-route-target"] == "rb"
    assert raw.headers["x-busbar-translation-dropped"] == "encrypted_content"
    first, second = sent(mock, "org-b")
    assert "encrypted_content" in first["body"]["input"][1]
    assert "encrypted_content" not in second["body"]["input"][1]
    raw = client.responses.with_raw_response.create(model="reason", input="hi")
    raw = client.responses.with_raw_response.create(model="reason", input="hi")
    assert raw.headers["x-busbar-route-target"] == "rb"    # B's breaker (consecutive_n: 1) never tripped


def test_c046c_previous_response_id_goes_to_its_issuer(replicas, mock):
    gw, _ = replicas
    client = sdk(gw)
    first = turn1(client)
    for _ in range(2):
        raw = client.responses.with_raw_response.create(model="reason", input="More.", previous_response_id=first.id)
        assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "ra")
        assert raw.parse().previous_response_id == first.id
    assert sent(mock, "org-b") == []


def test_c046c_a_stream_records_its_issuer_too(replicas, mock):
    gw, _ = replicas
    client = sdk(gw)
    with client.responses.stream(model="reason", input="Plan a trip to Lisbon.") as s:
        first = s.get_final_response()
    raw = client.responses.with_raw_response.create(model="reason", input="More.", previous_response_id=first.id)
    assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "ra")
    assert sent(mock, "org-b") == []


def test_c046c_issuer_down_gives_its_failure_never_the_other_members_not_found(replicas, mock):
    gw, _ = replicas
    client = sdk(gw)
    first = turn1(client)
    mock.script([{"match": {"path_prefix": "/org-a/"}, "times": 1, "response": {"status": 500}}])
    with pytest.raises(openai.InternalServerError) as e:
        client.responses.create(model="reason", input="More.", previous_response_id=first.id)
    assert e.value.status_code == 503
    assert e.value.body["message"] == "all upstream attempts failed; last: The server had an error while processing your request. Sorry about that!"
    with pytest.raises(openai.InternalServerError) as e:      # A's breaker is open: 503, B untouched
        client.responses.create(model="reason", input="More.", previous_response_id=first.id)
    assert e.value.status_code == 503
    assert e.value.body["message"] == "pool 'reason': no healthy upstream available; retry later"
    assert sent(mock, "org-b") == []


def test_c046c_unknown_issuer_skips_a_member_that_does_not_know_the_response(replicas, mock):
    gw, other = replicas
    first = turn1(sdk(gw))
    client = sdk(other)
    client.responses.create(model="reason", input="hi")          # SWRR: B is next on this replica
    raw = client.responses.with_raw_response.create(model="reason", input="More.", previous_response_id=first.id)
    assert (raw.status_code, raw.headers["x-busbar-route-target"]) == (200, "ra")
    (to_b,) = sent(mock, "org-b")
    assert to_b["body"]["previous_response_id"] == first.id
