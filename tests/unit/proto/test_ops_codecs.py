"""The op codecs (busbar.proto.ops) in process: reading, writing and what each drops, exact values.
End to end through real processes: tests/operations/."""
from __future__ import annotations

import pytest
from busbar.config.operations import DEFAULT_OPERATIONS, lane_operations, operations_faults
from busbar.ir.ops import EmbedRequest, EmbedResponse, ImageRequest
from busbar.proto.errors import BadRequest
from busbar.proto.ops import CODECS, codec
from busbar.proto.ops.base import b64_floats, floats_b64, vectors_of
from busbar.proto.ops.embed_bedrock import is_cohere
from busbar.proto.ops.images import aspect
from busbar.proto.ops.rerank import search_units
from busbar.server.ops_dispatch import invoke_operation
from busbar.server.routes import Route, match


def test_every_codec_is_a_default_operation_of_its_protocol():
    assert {(op, p) for op, p in CODECS} == {(op, p) for p, ops in DEFAULT_OPERATIONS.items() for op in ops
                                            if op != "chat"}
    assert codec("rerank", "openai") is None


def test_openai_input_shapes():
    oa = codec("embeddings", "openai")
    assert oa is not None
    one = oa.read_request({"model": "m", "input": "hi"})
    assert (one.inputs, one.single, one.encodings, one.tokens) == (["hi"], True, ("float",), False)
    tokens = oa.read_request({"model": "m", "input": [[1, 2], [3]], "user": "u"})
    assert (tokens.inputs, tokens.tokens, tokens.dropped) == ([], True, ["input", "user"])
    with pytest.raises(BadRequest, match=r"^'encoding_format' must be 'float' or 'base64'$"):
        oa.read_request({"model": "m", "input": "x", "encoding_format": "int8"})


def test_openai_writes_what_it_can_and_names_the_rest():
    oa = codec("embeddings", "openai")
    assert oa is not None
    req = EmbedRequest(["a"], input_type="search_query", truncate="end", dimensions=4,
                       names={"input_type": "taskType", "truncate": "truncate"})
    assert oa.write_request(req, "text-embedding-3-small") == (
        {"model": "text-embedding-3-small", "input": ["a"], "dimensions": 4}, ["taskType", "truncate"])
    out = oa.write_response(EmbedResponse([[0.5, -1.0]], 3), EmbedRequest(["a"], encodings=("base64",)), "pool")
    assert out == {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": "AAAAPwAAgL8="}],
                   "model": "pool", "usage": {"prompt_tokens": 3, "total_tokens": 3}}


def test_cohere_input_type_it_lacks_is_dropped_and_defaulted():
    co = codec("embeddings", "cohere")
    assert co is not None
    req = EmbedRequest(["a"], input_type="semantic_similarity", truncate="start", names={"input_type": "taskType"})
    assert co.write_request(req, "embed-english-v3.0") == (
        {"texts": ["a"], "input_type": "search_document", "embedding_types": ["float"], "truncate": "START",
         "model": "embed-english-v3.0"}, ["taskType"])
    read = co.read_request({"model": "m", "texts": ["a"], "input_type": "image", "embedding_types": ["int8"]})
    assert (read.input_type, read.dropped) == (None, ["embedding_types.int8"])


def test_gemini_batch_must_agree_and_egress_is_batch():
    gm = codec("embeddings", "gemini")
    assert gm is not None
    with pytest.raises(BadRequest, match=r"^'requests\[1\]': every request of a batch must have the same taskType"):
        gm.read_request({"requests": [{"content": {"parts": [{"text": "a"}]}, "taskType": "RETRIEVAL_QUERY"},
                                      {"content": {"parts": [{"text": "b"}]}}]}, "batchEmbedContents")
    single = gm.read_request({"content": {"parts": [{"text": "a"}, {"text": "b"}]}, "task_type": "CLUSTERING"},
                             "embedContent")
    assert (single.inputs, single.input_type, single.single) == (["a b"], "clustering", True)
    assert gm.write_request(single, "gemini-embedding-001") == ({"requests": [
        {"model": "models/gemini-embedding-001", "taskType": "CLUSTERING", "content": {"parts": [{"text": "a b"}]}}]},
        [])


def test_bedrock_body_by_model_and_titan_takes_one_input():
    br = codec("embeddings", "bedrock")
    assert br is not None
    assert [is_cohere(m) for m in ("cohere.embed-english-v3", "us.cohere.embed-v4:0", "amazon.titan-embed-text-v2:0")] \
        == [True, True, False]
    req = EmbedRequest(["a", "b"])
    assert br.serves(req, "amazon.titan-embed-text-v2:0") == "a Titan model embeds one input per call (2 given)"
    assert br.serves(req, "cohere.embed-english-v3") is None
    titan = br.read_request({"inputText": "x", "dimensions": 256, "normalize": False})
    assert (titan.inputs, titan.dimensions, titan.dropped) == (["x"], 256, ["normalize"])


def test_vector_helpers():
    assert b64_floats(floats_b64([0.25, -2.0, 3.5])) == [0.25, -2.0, 3.5]
    with pytest.raises(ValueError, match="whole number of float32 values"):
        b64_floats("AAA=")
    with pytest.raises(TypeError):
        vectors_of([["x"]])
    assert vectors_of([[], [1, 2.5]]) == [[], [1, 2.5]]


@pytest.mark.parametrize("docs,units", [(1, 1), (100, 1), (101, 2), (250, 3)])
def test_search_units(docs, units):
    assert search_units(docs) == units


@pytest.mark.parametrize("size,ratio", [("1024x1024", "1:1"), ("1536x1024", "4:3"), ("1792x1024", "16:9"),
                                        ("1024x1536", "3:4"), ("768x1408", "9:16")])
def test_image_aspect(size, ratio):
    assert aspect(size) == ratio


def test_image_negative_prompt_named_in_the_clients_spelling():
    oa = codec("images", "openai")
    assert oa is not None
    body, dropped = oa.write_request(ImageRequest("p", negative="fog", negative_field="parameters.negativePrompt"),
                                     "dall-e-3")
    assert body == {"model": "dall-e-3", "prompt": "p", "n": 1, "response_format": "b64_json"}
    assert dropped == ["parameters.negativePrompt"]


@pytest.mark.parametrize("body,op", [({"inputText": "x"}, "embeddings"), ({"texts": ["x"]}, "embeddings"),
                                     ({"query": "q", "documents": ["d"]}, "rerank"),
                                     ({"textToImageParams": {"text": "t"}}, "images"),
                                     ({"messages": [], "texts": ["x"]}, None), ({"anthropic_version": "v"}, None)])
def test_invoke_body_decides_the_operation(body, op):
    assert invoke_operation(body) == op


@pytest.mark.parametrize("path,route", [
    ("/v1/embeddings", Route("openai", None, None, False, None, op="embeddings")),
    ("/v2/embed", Route("cohere", None, None, False, None, op="embeddings")),
    ("/v1beta/models/m:batchEmbedContents", Route("gemini", "m", None, False, None, "batchEmbedContents",
                                                  "embeddings")),
    ("/v1beta/models/m:predict", Route("gemini", "m", None, False, None, "predict", "images")),
    ("/model/m/invoke", Route("bedrock-invoke", "m", None, False, None, op="invoke")),
    ("/model/m/invoke-with-response-stream", Route("bedrock-invoke", "m", None, True, None)),
    ("/v1/images/edits", Route("openai", None, None, False, None, op="images.edits")),
])
def test_operation_routes(path, route):
    assert match("POST", path) == route


def test_operations_faults_and_defaults():
    assert operations_faults("anthropic", ["chat", "embeddings"]) == [
        "protocol anthropic cannot serve embeddings in this build (it serves chat; see docs/beyond-chat.md)"]
    assert operations_faults("openai", ["chat", "chat"]) == ["lists an operation twice"]
    assert lane_operations("cohere", None) == frozenset({"chat", "embeddings", "rerank"})
    assert lane_operations("cohere", ["rerank"]) == frozenset({"rerank"})
