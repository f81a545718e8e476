"""Embeddings through pools: members that cannot serve the operation are skipped (never tried, never
penalized), a target with none answers the caller's native 404 naming the operation, failover before
the first byte, the breaker, ``on_exhausted`` (reject and fallback_pool), client errors relayed
without failover, operations this build does not serve, and boot checks of ``models.*.operations``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cohere
import httpx
import openai
import pytest
from busbar_mock_provider.embeddings import vector

BUSBAR = str(Path(sys.executable).parent / "busbar")

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  co: { protocol: cohere, base_url: MOCK, api_key: { env: T_COHERE_KEY } }
  an: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
  br: { protocol: bedrock, base_url: MOCK, api_key: { env: T_AWS_CREDS } }
models:
  an-chat: { provider: an, upstream_model: claude-3-5-haiku-latest }
  oa-chat-only: { provider: oa, upstream_model: gpt-4o-mini, operations: [chat] }
  oa-embed: { provider: oa, upstream_model: text-embedding-3-small, operations: [chat, embeddings] }
  fo-a: { provider: oa }
  fo-b: { provider: oa }
  br-a: { provider: oa }
  ex-a: { provider: oa }
  backup: { provider: co, upstream_model: embed-english-v3.0 }
  titan: { provider: br, upstream_model: "amazon.titan-embed-text-v2:0" }
  co-embed: { provider: co, upstream_model: embed-english-v3.0 }
pools:
  mixed: { members: [ { model: an-chat, weight: 50 }, { model: oa-chat-only, weight: 50 }, { model: oa-embed } ] }
  chat-only: { members: [ { model: an-chat }, { model: oa-chat-only } ] }
  failover:
    members: [ { model: fo-a, weight: 100 }, { model: fo-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 50 } }
  breaker:
    members: [ { model: br-a, weight: 100 }, { model: fo-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1 }, base_cooldown_secs: 30, max_cooldown_secs: 60 }
  exhausted:
    members: [ { model: ex-a } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1 }, base_cooldown_secs: 30, max_cooldown_secs: 60 }
  falls-back:
    members: [ { model: an-chat } ]
    on_exhausted: { fallback_pool: embed-backup }
  embed-backup: { members: [ { model: backup } ] }
  titan-first: { members: [ { model: titan, weight: 100 }, { model: co-embed, weight: 1 } ] }
  strict: { translation: strict, members: [ { model: oa-embed } ] }
"""

ERR_503 = {"error": {"message": "The server is overloaded", "type": "server_error", "param": None, "code": None}}
ERR_400 = {"error": {"message": "'$.input' is invalid. Please check the API reference", "type":
                     "invalid_request_error", "param": None, "code": None}}


def _paths(mock):
    return [r["path"] for r in mock.requests()]


def test_members_that_cannot_embed_are_skipped(oa, mock):
    for _ in range(4):
        raw = oa.embeddings.with_raw_response.create(model="mixed", input=["skip"])
        assert raw.headers["x-busbar-route-target"] == "oa-embed"
        assert raw.parse().data[0].embedding == vector("skip")
    assert _paths(mock) == ["/v1/embeddings"] * 4          # never a chat-only member
    chat = oa.chat.completions.with_raw_response.create(model="mixed", messages=[{"role": "user", "content": "hi"}])
    assert chat.status_code == 200                          # the skipped members still serve chat


def test_pool_with_no_able_member_is_a_native_404(oa, mock):
    with pytest.raises(openai.NotFoundError) as e:
        oa.embeddings.create(model="chat-only", input="x")
    assert e.value.status_code == 404
    assert e.value.body["message"] == (
        "pool 'chat-only' has no member that can serve embeddings (declare it in the member models' "
        "operations, or add a model whose protocol serves embeddings)")
    assert e.value.body["type"] == "not_found_error"
    assert mock.requests() == []


def test_direct_model_that_cannot_embed_is_a_native_404(gw, mock):
    with httpx.Client(timeout=20) as http:
        co = cohere.ClientV2(api_key="x", base_url=gw.url, httpx_client=http)
        with pytest.raises(cohere.NotFoundError) as e:
            co.embed(model="an-chat", texts=["x"], input_type="search_query", request_options={"max_retries": 0})
    assert e.value.status_code == 404
    assert e.value.body["message"] == ("the model 'an-chat' cannot serve embeddings: model 'an-chat' does not "
                                       "declare embeddings (models.an-chat.operations)")
    assert mock.requests() == []


def test_unknown_model_is_a_native_404(oa):
    with pytest.raises(openai.NotFoundError) as e:
        oa.embeddings.create(model="nope", input="x")
    assert e.value.body["message"] == "the model 'nope' does not exist: no pool or model of that name is configured"


def test_failover_before_the_first_byte(oa, mock):
    mock.script([{"match": {"model": "fo-a"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    raw = oa.embeddings.with_raw_response.create(model="failover", input=["fail over"])
    assert raw.headers["x-busbar-route-target"] == "fo-b"
    assert raw.parse().data[0].embedding == vector("fail over")
    assert [r["body"]["model"] for r in mock.requests()] == ["fo-a", "fo-b"]


def test_an_answer_that_does_not_fit_the_request_fails_over(gw, mock):
    short = {"object": "list", "data": [], "model": "fo-a", "usage": {"prompt_tokens": 1, "total_tokens": 1}}
    mock.script([{"match": {"model": "fo-a"}, "times": 1, "response": {"status": 200, "body": short}}])
    with httpx.Client(timeout=20) as http:
        co = cohere.ClientV2(api_key="x", base_url=gw.url, httpx_client=http)
        raw = co.with_raw_response.embed(model="failover", texts=["one"], input_type="search_query",
                                         embedding_types=["float"], request_options={"max_retries": 0})
    assert raw.headers["x-busbar-route-target"] == "fo-b"        # 0 vectors for 1 input: the upstream's fault
    assert raw.data.embeddings.float_ == [vector("one")]
    assert [r["body"]["model"] for r in mock.requests()] == ["fo-a", "fo-b"]


def test_client_error_is_relayed_without_failover(oa, mock):
    mock.script([{"match": {"model": "fo-a"}, "times": 1, "response": {"status": 400, "body": ERR_400}}])
    with pytest.raises(openai.BadRequestError) as e:
        oa.embeddings.create(model="failover", input=["too long"])
    assert e.value.body == ERR_400["error"]
    assert [r["body"]["model"] for r in mock.requests()] == ["fo-a"]


def test_breaker_trips_per_operation_request(oa, mock):
    mock.script([{"match": {"model": "br-a"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    first = oa.embeddings.with_raw_response.create(model="breaker", input=["a"])
    assert first.headers["x-busbar-route-target"] == "fo-b"
    second = oa.embeddings.with_raw_response.create(model="breaker", input=["b"])
    assert second.headers["x-busbar-route-target"] == "fo-b"        # br-a is open: not tried again
    assert [r["body"]["model"] for r in mock.requests()] == ["br-a", "fo-b", "fo-b"]


def test_on_exhausted_reject_then_retry_after(oa, mock):
    mock.script([{"match": {"model": "ex-a"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    with pytest.raises(openai.InternalServerError) as e:
        oa.embeddings.create(model="exhausted", input=["a"])
    assert e.value.status_code == 503
    with pytest.raises(openai.InternalServerError) as e2:
        oa.embeddings.create(model="exhausted", input=["a"])
    assert e2.value.status_code == 503
    assert e2.value.body["message"] == "pool 'exhausted': no healthy upstream available; retry later"
    assert 1 <= int(e2.value.response.headers["retry-after"]) <= 60
    assert len(mock.requests()) == 1                  # the open breaker: nothing tried the second time


def test_on_exhausted_fallback_pool_serves_the_operation(oa, mock):
    raw = oa.embeddings.with_raw_response.create(model="falls-back", input=["fb"])
    assert raw.headers["x-busbar-route-target"] == "backup"
    assert raw.parse().data[0].embedding == vector("fb")
    assert _paths(mock) == ["/v2/embed"]


def test_titan_takes_one_input_a_batch_skips_it(oa, mock):
    one = oa.embeddings.with_raw_response.create(model="titan-first", input="one")
    assert one.headers["x-busbar-route-target"] == "titan"
    batch = oa.embeddings.with_raw_response.create(model="titan-first", input=["one", "two"])
    assert batch.headers["x-busbar-route-target"] == "co-embed"
    assert [d.embedding for d in batch.parse().data] == [vector("one"), vector("two")]
    assert _paths(mock) == ["/model/amazon.titan-embed-text-v2:0/invoke", "/v2/embed"]


def test_a_strict_pool_refuses_a_lossy_embeddings_hop(gw, mock):
    with httpx.Client(timeout=20) as http:
        co = cohere.ClientV2(api_key="x", base_url=gw.url, httpx_client=http)
        with pytest.raises(cohere.BadRequestError) as e:
            co.embed(model="strict", texts=["x"], input_type="search_query", request_options={"max_retries": 0})
    assert e.value.body["message"] == ("translation: strict refuses a lossy hop to openai (lane 'oa-embed'): "
                                       "it would drop input_type")
    assert mock.requests() == []


@pytest.mark.parametrize("body,message", [
    ({"model": "mixed"}, "'input' is required: a string or a list of strings"),
    ({"model": "mixed", "input": [1.5]}, "'input' must be a string or a non-empty list of strings"),
    ({"model": "mixed", "input": "x", "encoding_format": "int8"}, "'encoding_format' must be 'float' or 'base64'"),
    ({"model": "mixed", "input": "x", "dimensions": 0}, "'dimensions' must be a positive integer"),
    ({"input": "x"}, "'model' is required: name a pool or a model"),
])
def test_bad_openai_bodies_are_400_in_the_callers_envelope(gw, mock, body, message):
    r = httpx.post(gw.url + "/v1/embeddings", json=body)
    assert r.status_code == 400
    assert r.json() == {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    assert mock.requests() == []


def test_bad_gemini_and_bedrock_bodies(gw):
    g = httpx.post(gw.url + "/v1beta/models/mixed:batchEmbedContents", json={"requests": []})
    assert g.status_code == 400
    assert g.json()["error"]["message"] == "'requests' must be a non-empty list of embedContent requests"
    assert g.json()["error"]["status"] == "INVALID_ARGUMENT"
    b = httpx.post(gw.url + "/model/mixed/invoke", json={"inputText": 7})
    assert b.status_code == 400
    assert b.json() == {"message": "'inputText' must be a string"}


@pytest.mark.parametrize("path,status_line", [
    ("/v1/images/edits", "image edits are not supported: busbar routes image generation only "
                         "(/v1/images/generations); see docs/beyond-chat.md"),
    ("/v1/images/variations", "image variations are not supported: busbar routes image generation only "
                              "(/v1/images/generations); see docs/beyond-chat.md"),
])
def test_operations_not_served_answer_a_native_404(gw, path, status_line):
    r = httpx.post(gw.url + path, files={"file": ("a.wav", b"RIFF....", "audio/wav")}, data={"model": "mixed"})
    assert r.status_code == 404
    assert r.json()["error"]["message"] == status_line
    assert r.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("ops,fault", [
    ("[rerank]", "models.m.operations: protocol openai cannot serve rerank in this build (it serves audio, "
                 "chat, embeddings, images, moderation; see docs/beyond-chat.md)"),
    ("[chat, telepathy]", "models.m.operations: 'telepathy' is not an operation; use chat, embeddings, rerank, "
                          "moderation, images, audio"),
    ("[]", "models.m.operations: must list at least one operation (omit it for the protocol's default)"),
])
def test_boot_refuses_operations_a_protocol_cannot_serve(tmp_path, ops, fault):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("providers:\n  oa: { protocol: openai, base_url: 'https://api.openai.com', api_key: { env: K } }\n"
                   f"models:\n  m: {{ provider: oa, operations: {ops} }}\n")
    r = subprocess.run([BUSBAR, "--validate", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "K": "k"}, check=False)
    assert r.returncode != 0
    assert fault in r.stderr


_PRICED = ("providers:\n  oa: { protocol: openai, base_url: 'https://api.openai.com', api_key: { env: K } }\n"
           "  co: { protocol: cohere, base_url: 'https://api.cohere.com', api_key: { env: K } }\n"
           "models:\n  img: { provider: oa, operations: [images] }\n  img2: { provider: oa, operations: [images] }\n"
           "  chat: { provider: oa, operations: [chat] }\n  rr: { provider: co }\n  rr2: { provider: co }\n"
           "rate_card:\n  img: { per_image_utok: 40000 }\n  chat: { input_utok: 1 }\n  rr: { per_search_unit_utok: 2000 }\n")


@pytest.mark.parametrize("entries,faults", [
    ("  img2: { per_image_utok: 0 }\n  rr2: { per_search_unit_utok: 1.5 }\n", []),
    ("  rr2: { per_search_unit_utok: 1.5 }\n",
     ["config.yaml: rate_card: no entry for model 'img2' (a present rate_card must price every configured model); "
      "paste under rate_card:  img2: { input_utok: 0.0, output_utok: 0.0, per_image_utok: 0.0 }"]),
    ("  img2: { input_utok: 1 }\n  rr2: { per_search_unit_utok: -1 }\n",
     ["config.yaml: rate_card.rr2.per_search_unit_utok: -1.0 is not allowed; a rate is a finite number ≥ 0",
      "config.yaml: rate_card.img2: model 'img2' serves images, which the rate card prices per unit for other "
      "models; price it here too (0.0 for free): add per_image_utok: 0.0"]),
])
def test_per_operation_rates_are_all_or_nothing_per_operation(tmp_path, entries, faults):
    """A unit rate set for one model must be set for every model serving that operation (0.0 = free);
    a model serving none of the priced operations needs none (``chat``)."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(_PRICED + entries)
    r = subprocess.run([BUSBAR, "--validate", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "K": "k"}, check=False)
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("config.yaml: rate_card")] == faults
    assert (r.returncode == 0) == (not faults)
