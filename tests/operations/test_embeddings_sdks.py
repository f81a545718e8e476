"""Embeddings through real busbar + mock processes, driven by the official SDKs of every surface:
openai ``embeddings.create``, cohere ``embed``, google-genai ``embed_content``, boto3
``invoke_model`` (Titan and Cohere-on-Bedrock bodies), same protocol and across every pair.

The mock's vectors are deterministic (``busbar_mock_provider.embeddings.vector``) and exact in
float32, so every answer is compared value for value with what the upstream computed."""
from __future__ import annotations

import json

import httpx
import pytest
from busbar_mock_provider.embeddings import vector
from google import genai
from google.genai import types

# Pool names avoid "gemini": google-genai treats such a model name as multimodal and merges a list
# of texts into one content (one vector).
CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  co: { protocol: cohere, base_url: MOCK, api_key: { env: T_COHERE_KEY } }
  gm: { protocol: gemini, base_url: MOCK, api_key: { env: T_GEMINI_KEY } }
  br: { protocol: bedrock, base_url: MOCK, api_key: { env: T_AWS_CREDS } }
models:
  oa-embed: { provider: oa, upstream_model: text-embedding-3-small }
  co-embed: { provider: co, upstream_model: embed-english-v3.0 }
  gm-embed: { provider: gm, upstream_model: gemini-embedding-001 }
  titan: { provider: br, upstream_model: "amazon.titan-embed-text-v2:0" }
  br-cohere: { provider: br, upstream_model: cohere.embed-english-v3 }
pools:
  to-openai: { members: [ { model: oa-embed } ] }
  to-cohere: { members: [ { model: co-embed } ] }
  to-gm: { members: [ { model: gm-embed } ] }
  to-titan: { members: [ { model: titan } ] }
  to-br-cohere: { members: [ { model: br-cohere } ] }
"""

POOLS = {"to-openai": ("oa-embed", "/v1/embeddings"), "to-cohere": ("co-embed", "/v2/embed"),
         "to-gm": ("gm-embed", "/v1beta/models/gemini-embedding-001:batchEmbedContents"),
         "to-titan": ("titan", "/model/amazon.titan-embed-text-v2:0/invoke"),
         "to-br-cohere": ("br-cohere", "/model/cohere.embed-english-v3/invoke")}
BATCH_POOLS = [p for p in POOLS if p != "to-titan"]       # Titan embeds one text per call
TEXTS = ["the first document", "a second, longer document about gateways"]


@pytest.fixture()
def gm(gw):
    client = genai.Client(api_key="x", http_options=types.HttpOptions(
        base_url=gw.url, timeout=20000, retry_options=types.HttpRetryOptions(attempts=1)))
    yield client
    client.close()


def _upstream(mock):
    sent = mock.requests()
    assert len(sent) == 1
    return sent[0]


# ------------------------------------------------------------------------------------------ openai


@pytest.mark.parametrize("pool", BATCH_POOLS)
def test_openai_sdk_batch_every_lane(oa, mock, pool):
    raw = oa.embeddings.with_raw_response.create(model=pool, input=TEXTS)   # the SDK asks for base64
    assert raw.status_code == 200
    assert raw.headers["x-busbar-route-target"] == POOLS[pool][0]
    r = raw.parse()
    assert [d.index for d in r.data] == [0, 1]
    assert [d.embedding for d in r.data] == [vector(t) for t in TEXTS]
    sent = _upstream(mock)
    assert sent["path"] == POOLS[pool][1]
    if pool == "to-openai":         # same protocol: the client's bytes, model rewritten
        assert sent["body"] == {"model": "text-embedding-3-small", "input": TEXTS, "encoding_format": "base64"}
        assert r.usage.prompt_tokens == 5 + 10
    elif pool == "to-cohere":
        assert sent["body"] == {"model": "embed-english-v3.0", "texts": TEXTS, "input_type": "search_document",
                                "embedding_types": ["float"]}
        assert sent["headers"]["authorization"] == "Bearer co-test-key"
        assert r.usage.prompt_tokens == 15
        assert r.model == pool
    elif pool == "to-gm":
        assert sent["body"] == {"requests": [
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": t}]}} for t in TEXTS]}
        assert sent["headers"]["x-goog-api-key"] == "g-test-key"
        assert r.usage.prompt_tokens == 0            # the Gemini API reports no token counts
    else:
        assert sent["body"] == {"texts": TEXTS, "input_type": "search_document", "embedding_types": ["float"]}
        assert sent["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")


def test_openai_sdk_float_and_dimensions_across(oa, mock):
    r = oa.embeddings.create(model="to-titan", input="one text", encoding_format="float", dimensions=4)
    assert r.data[0].embedding == vector("one text", 4)
    assert r.usage.prompt_tokens == 2 and r.usage.total_tokens == 2
    assert _upstream(mock)["body"] == {"inputText": "one text", "dimensions": 4}


def test_openai_sdk_dimensions_to_gemini_and_cohere(oa, mock):
    oa.embeddings.create(model="to-gm", input=["x"], dimensions=3)
    assert mock.requests()[-1]["body"]["requests"][0]["outputDimensionality"] == 3
    r = oa.embeddings.create(model="to-cohere", input=["x"], dimensions=3)
    assert mock.requests()[-1]["body"]["output_dimension"] == 3
    assert r.data[0].embedding == vector("x", 3)


# ------------------------------------------------------------------------------------------ cohere


@pytest.mark.parametrize("pool", BATCH_POOLS)
def test_cohere_sdk_every_lane(co, mock, pool):
    r = co.embed(model=pool, texts=TEXTS, input_type="search_query", embedding_types=["float"],
                 request_options={"max_retries": 0})
    assert r.embeddings.float_ == [vector(t) for t in TEXTS]
    body = _upstream(mock)["body"]
    if pool == "to-gm":
        assert {q["taskType"] for q in body["requests"]} == {"RETRIEVAL_QUERY"}
    elif pool in ("to-cohere", "to-br-cohere"):
        assert body["input_type"] == "search_query"
    else:
        assert "input_type" not in body


def test_cohere_sdk_drops_what_openai_cannot_carry(co, mock):
    raw = co.with_raw_response.embed(model="to-openai", texts=["a"], input_type="classification", truncate="END",
                                     embedding_types=["float", "int8", "base64"], request_options={"max_retries": 0})
    assert raw.headers["x-busbar-translation-dropped"] == "embedding_types.int8, input_type, truncate"
    r = raw.data
    assert r.embeddings.float_ == [vector("a")]
    assert r.embeddings.int8 is None
    assert len(r.embeddings.base64) == 1
    assert r.response_type == "embeddings_by_type"
    assert r.meta.billed_units.input_tokens == 1
    assert _upstream(mock)["body"] == {"model": "text-embedding-3-small", "input": ["a"]}


def test_cohere_truncate_reaches_bedrock_cohere(co, mock):
    co.embed(model="to-br-cohere", texts=["a"], input_type="clustering", truncate="START",
             embedding_types=["float"], request_options={"max_retries": 0})
    body = _upstream(mock)["body"]
    assert body["truncate"] == "START" and body["input_type"] == "clustering"


# ------------------------------------------------------------------------------------------ gemini


@pytest.mark.parametrize("pool", BATCH_POOLS)
def test_genai_sdk_every_lane(gm, mock, pool):
    r = gm.models.embed_content(model=pool, contents=TEXTS,
                                config=types.EmbedContentConfig(task_type="RETRIEVAL_DOCUMENT"))
    assert [e.values for e in r.embeddings] == [vector(t) for t in TEXTS]
    body = _upstream(mock)["body"]
    if pool in ("to-cohere", "to-br-cohere"):
        assert body["input_type"] == "search_document"


def test_genai_single_text_to_titan(gm, mock):
    r = gm.models.embed_content(model="to-titan", contents="solo")
    assert [e.values for e in r.embeddings] == [vector("solo")]


def test_gemini_embed_content_verb(gw, mock):
    r = httpx.post(gw.url + "/v1beta/models/to-openai:embedContent",
                   json={"content": {"parts": [{"text": "hi"}]}, "taskType": "SEMANTIC_SIMILARITY", "title": "t"},
                   headers={"x-goog-api-key": "x"})
    assert r.status_code == 200
    assert r.json() == {"embedding": {"values": vector("hi")}}
    assert r.headers["x-busbar-translation-dropped"] == "title, taskType"


# ------------------------------------------------------------------------------------------ bedrock


@pytest.mark.parametrize("pool", list(POOLS))
def test_boto3_titan_body_every_lane(br, mock, pool):
    r = br.invoke_model(modelId=pool, body=json.dumps({"inputText": "hello titan"}),
                        contentType="application/json", accept="application/json")
    doc = json.loads(r["body"].read())
    assert doc["embedding"] == vector("hello titan")
    assert doc["embeddingsByType"] == {"float": vector("hello titan")}
    if pool in ("to-openai", "to-cohere", "to-titan"):
        assert doc["inputTextTokenCount"] == 3


@pytest.mark.parametrize("pool", BATCH_POOLS)
def test_boto3_cohere_body_every_lane(br, mock, pool):
    r = br.invoke_model(modelId=pool, body=json.dumps({"texts": TEXTS, "input_type": "search_document"}))
    doc = json.loads(r["body"].read())
    assert doc["embeddings"] == [vector(t) for t in TEXTS]
    assert doc["response_type"] == "embeddings_floats"
    assert doc["texts"] == TEXTS
