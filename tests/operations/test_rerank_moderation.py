"""Rerank (Cohere ``/v2/rerank`` and Bedrock ``invoke``, both ways) and moderation (OpenAI
``/v1/moderations``) through real busbar + mock processes, driven by the official SDKs: cohere
``rerank``, boto3 ``invoke_model``, openai ``moderations.create``; failover per operation, usage
normalised to search units, and a moderation pool with no OpenAI member answering a native 404."""
from __future__ import annotations

import json

import httpx
import openai
import pytest
from busbar_mock_provider.rerank import rerank_results

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  co: { protocol: cohere, base_url: MOCK, api_key: { env: T_COHERE_KEY } }
  br: { protocol: bedrock, base_url: MOCK, api_key: { env: T_AWS_CREDS } }
models:
  co-rerank: { provider: co, upstream_model: rerank-v3.5 }
  br-rerank: { provider: br, upstream_model: "cohere.rerank-v3-5:0" }
  amz-rerank: { provider: br, upstream_model: "amazon.rerank-v1:0" }
  oa-mod: { provider: oa, upstream_model: omni-moderation-latest }
  co-chat: { provider: co, upstream_model: command-r }
pools:
  to-co: { members: [ { model: co-rerank } ] }
  to-br: { members: [ { model: br-rerank } ] }
  to-amz: { members: [ { model: amz-rerank } ] }
  rerank-fo:
    members: [ { model: co-rerank, weight: 100 }, { model: br-rerank, weight: 1 } ]
  mod: { members: [ { model: co-chat }, { model: oa-mod } ] }
  no-mod: { members: [ { model: co-chat } ] }
"""

QUERY = "capital of france"
DOCS = ["Berlin is the capital of Germany", "Paris is the capital of France", "Bananas are yellow"]
ERR_503 = {"id": "x", "message": "internal server error"}


EXPECTED = [(r["index"], r["relevance_score"]) for r in rerank_results(QUERY, DOCS, 2)]


@pytest.mark.parametrize("pool,path,body", [
    ("to-co", "/v2/rerank", {"model": "rerank-v3.5", "query": QUERY, "documents": DOCS, "top_n": 2}),
    ("to-br", "/model/cohere.rerank-v3-5:0/invoke", {"query": QUERY, "documents": DOCS, "top_n": 2,
                                                     "api_version": 2}),
    ("to-amz", "/model/amazon.rerank-v1:0/invoke", {"query": QUERY, "documents": DOCS, "top_n": 2}),
])
def test_cohere_sdk_rerank_every_lane(co, mock, pool, path, body):
    raw = co.with_raw_response.rerank(model=pool, query=QUERY, documents=DOCS, top_n=2,
                                      request_options={"max_retries": 0})
    r = raw.data
    assert [(x.index, x.relevance_score) for x in r.results] == EXPECTED
    assert r.results[0].index == 1                   # Paris
    assert r.meta.billed_units.search_units == 1
    (sent,) = mock.requests()
    assert (sent["path"], sent["body"] if pool == "to-co" else
            {k: v for k, v in sent["body"].items() if k not in ("model", "stream")}) == (path, body)


@pytest.mark.parametrize("pool", ["to-co", "to-br", "to-amz"])
def test_boto3_rerank_every_lane(br, mock, pool):
    r = br.invoke_model(modelId=pool, body=json.dumps({"query": QUERY, "documents": DOCS, "top_n": 2}))
    doc = json.loads(r["body"].read())
    assert [(x["index"], x["relevance_score"]) for x in doc["results"]] == EXPECTED


def test_rerank_fails_over_across_protocols(co, mock):
    mock.script([{"match": {"model": "rerank-v3.5"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    raw = co.with_raw_response.rerank(model="rerank-fo", query=QUERY, documents=DOCS,
                                      request_options={"max_retries": 0})
    assert raw.headers["x-busbar-route-target"] == "br-rerank"
    assert [x.index for x in raw.data.results] == [r["index"] for r in rerank_results(QUERY, DOCS, None)]
    assert [r["path"] for r in mock.requests()] == ["/v2/rerank", "/model/cohere.rerank-v3-5:0/invoke"]


def test_bad_rerank_body_is_a_cohere_400(gw, mock):
    r = httpx.post(gw.url + "/v2/rerank", json={"model": "to-co", "query": QUERY, "documents": [1]})
    assert r.status_code == 400
    assert r.json() == {"message": "'documents[0]' must be a string"}
    assert mock.requests() == []


def test_openai_sdk_moderation_skips_members_without_it(gw, mock):
    with openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as oa:
        raw = oa.moderations.with_raw_response.create(model="mod", input=["I will kill the process", "hello"])
        assert raw.headers["x-busbar-route-target"] == "oa-mod"
        r = raw.parse()
        assert [x.flagged for x in r.results] == [True, False]
        assert r.results[0].categories.violence is True
        assert r.model == "omni-moderation-latest"
        (sent,) = mock.requests()
        assert sent["path"] == "/v1/moderations"
        assert sent["body"] == {"model": "omni-moderation-latest", "input": ["I will kill the process", "hello"]}
        with pytest.raises(openai.NotFoundError) as e:
            oa.moderations.create(model="no-mod", input="x")
    assert e.value.body["message"] == (
        "pool 'no-mod' has no member that can serve moderation (declare it in the member models' operations, "
        "or add a model whose protocol serves moderation)")
