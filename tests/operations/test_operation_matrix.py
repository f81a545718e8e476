"""The operations matrix: each official SDK call of a non-chat operation (rows) against a pool of two
members of each provider protocol (columns), through a real busbar and the mock provider.

Per cell where the provider protocol serves the operation: **V** the answer carries exactly the
values the upstream computed (vectors, relevance scores, moderation flags, images, transcripts,
speech bytes), **F** a 503 on the first
member fails over to the second before the first byte. Where it does not, the cell checks the
caller's native 404 naming the operation (``404``). The outcome is written to the
"Operations beyond chat" section of docs/protocol-matrix.md when every cell ran.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import cohere
import httpx
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from busbar_mock_provider.audio import TRANSCRIPT
from busbar_mock_provider.embeddings import vector
from busbar_mock_provider.images import PNG_B64
from busbar_mock_provider.rerank import rerank_results
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

ROOT = Path(__file__).resolve().parents[2]
MARKER = "## Operations beyond chat"
PROVIDERS = ("openai", "responses", "anthropic", "gemini", "bedrock", "cohere")
#: (operation, provider protocol) -> the two members' upstream models (first fails over to second)
SERVED = {
    ("embeddings", "openai"): ("text-embedding-3-small", "text-embedding-3-large"),
    ("embeddings", "cohere"): ("embed-english-v3.0", "embed-multilingual-v3.0"),
    ("embeddings", "gemini"): ("gemini-embedding-001", "text-embedding-004"),
    ("embeddings", "bedrock"): ("cohere.embed-english-v3", "cohere.embed-multilingual-v3"),
    ("rerank", "cohere"): ("rerank-v3.5", "rerank-english-v3.0"),
    ("rerank", "bedrock"): ("cohere.rerank-v3-5:0", "amazon.rerank-v1:0"),
    ("moderation", "openai"): ("omni-moderation-latest", "text-moderation-latest"),
    ("images", "openai"): ("dall-e-3", "gpt-image-1"),
    ("images", "gemini"): ("imagen-3.0-generate-002", "imagen-4.0-generate-001"),
    ("images", "bedrock"): ("amazon.titan-image-generator-v2:0", "amazon.nova-canvas-v1:0"),
    ("audio", "openai"): ("whisper-1", "whisper-large-v3"),     # verbose_json: gpt-4o-transcribe refuses it
    ("audio", "gemini"): ("gemini-2.0-flash", "gemini-2.5-flash"),     # uploads only, via :generateContent
}
#: (row, provider protocol) cells a protocol serving the operation still cannot serve (native 404)
UNSERVED_CELLS = {("openai audio.speech.create", "gemini")}
UNSERVED_MODEL = {"openai": "gpt-4o-mini", "responses": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest",
                  "gemini": "gemini-2.0-flash", "bedrock": "amazon.nova-micro-v1:0", "cohere": "command-r"}
KEYS = {"KEY_OPENAI": "sk-o", "KEY_RESPONSES": "sk-r", "KEY_ANTHROPIC": "sk-ant-api-a", "KEY_GEMINI": "g-key",
        "KEY_BEDROCK": "AKIDEXAMPLE:secretkey", "KEY_COHERE": "co-key"}
TEXTS = ["matrix one", "matrix two"]
QUERY, DOCS = "capital of france", ["Berlin is in Germany", "Paris is the capital of France"]


def _pool(row: int, proto: str) -> str:
    """One pool per cell (a fresh breaker cell per check); never "gemini" in a name: google-genai
    treats such a model as multimodal and merges a list of texts into one content."""
    return f"row{row}-{proto.replace('gemini', 'gm')}"


def _config() -> str:
    out = ['listen: "127.0.0.1:{port}"\nproviders:\n']
    for p in PROVIDERS:
        out.append(f"  up-{p}: {{ protocol: {p}, base_url: MOCK, api_key: {{ env: KEY_{p.upper()} }} }}\n")
    models, pools = ["models:\n"], ["pools:\n"]
    for op in ("embeddings", "rerank", "moderation", "images", "audio"):
        for p in PROVIDERS:
            ups = SERVED.get((op, p), (UNSERVED_MODEL[p], UNSERVED_MODEL[p]))
            for tag, up in zip("ab", ups):
                models.append(f'  {op}-{p}-{tag}: {{ provider: up-{p}, upstream_model: "{up}" }}\n')
    for i, (op, _, _) in enumerate(ROWS.values()):
        for p in PROVIDERS:
            pools.append(f"  {_pool(i, p)}: {{ members: [ {{ model: {op}-{p}-a, weight: 100 }}, "
                         f"{{ model: {op}-{p}-b, weight: 1 }} ] }}\n")
    return "".join(out + models + pools)


# ------------------------------------------------------------------------------------------ clients
# Each returns (the values the client parsed, the lane that served) or raises the SDK's 404 error.

def _openai_embed(url: str, pool: str) -> tuple[Any, str]:
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as c:
        raw = c.embeddings.with_raw_response.create(model=pool, input=TEXTS)
        return [d.embedding for d in raw.parse().data], raw.headers["x-busbar-route-target"]


def _cohere_client(http: httpx.Client, url: str) -> cohere.ClientV2:
    return cohere.ClientV2(api_key="x", base_url=url, httpx_client=http)


def _cohere_embed(url: str, pool: str) -> tuple[Any, str]:
    with httpx.Client(timeout=20) as http:
        raw = _cohere_client(http, url).with_raw_response.embed(
            model=pool, texts=TEXTS, input_type="search_document", embedding_types=["float"],
            request_options={"max_retries": 0})
        return raw.data.embeddings.float_, raw.headers["x-busbar-route-target"]


def _genai_embed(url: str, pool: str) -> tuple[Any, str]:
    c = genai.Client(api_key="x", http_options=types.HttpOptions(
        base_url=url, timeout=20000, retry_options=types.HttpRetryOptions(attempts=1)))
    try:
        r = c.models.embed_content(model=pool, contents=TEXTS)
        assert r.sdk_http_response is not None and r.sdk_http_response.headers is not None
        return [e.values for e in r.embeddings or []], r.sdk_http_response.headers["x-busbar-route-target"]
    finally:
        c.close()


def _boto3(url: str) -> Any:
    return boto3.client("bedrock-runtime", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=20))


def _invoke(url: str, pool: str, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    r = _boto3(url).invoke_model(modelId=pool, body=json.dumps(body))
    return json.loads(r["body"].read()), r["ResponseMetadata"]["HTTPHeaders"]["x-busbar-route-target"]


def _boto3_titan(url: str, pool: str) -> tuple[Any, str]:
    doc, lane = _invoke(url, pool, {"inputText": TEXTS[0]})
    return [doc["embedding"]], lane


def _boto3_cohere_embed(url: str, pool: str) -> tuple[Any, str]:
    doc, lane = _invoke(url, pool, {"texts": TEXTS, "input_type": "search_document"})
    return doc["embeddings"], lane


def _cohere_rerank(url: str, pool: str) -> tuple[Any, str]:
    with httpx.Client(timeout=20) as http:
        raw = _cohere_client(http, url).with_raw_response.rerank(model=pool, query=QUERY, documents=DOCS,
                                                                 request_options={"max_retries": 0})
        return [(r.index, r.relevance_score) for r in raw.data.results], raw.headers["x-busbar-route-target"]


def _boto3_rerank(url: str, pool: str) -> tuple[Any, str]:
    doc, lane = _invoke(url, pool, {"query": QUERY, "documents": DOCS})
    return [(r["index"], r["relevance_score"]) for r in doc["results"]], lane


def _openai_moderation(url: str, pool: str) -> tuple[Any, str]:
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as c:
        raw = c.moderations.with_raw_response.create(model=pool, input=["kill it", "hello"])
        return [r.flagged for r in raw.parse().results], raw.headers["x-busbar-route-target"]


def _openai_images(url: str, pool: str) -> tuple[Any, str]:
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as c:
        raw = c.images.with_raw_response.generate(model=pool, prompt="a lighthouse", n=2, response_format="b64_json")
        return [d.b64_json for d in raw.parse().data], raw.headers["x-busbar-route-target"]


def _boto3_image(url: str, pool: str) -> tuple[Any, str]:
    doc, lane = _invoke(url, pool, {"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a lighthouse"},
                                    "imageGenerationConfig": {"numberOfImages": 2}})
    return doc["images"], lane


def _openai_transcribe(url: str, pool: str) -> tuple[Any, str]:
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as c:
        raw = c.audio.transcriptions.with_raw_response.create(file=("a.wav", b"RIFF" * 4000, "audio/wav"),
                                                              model=pool, response_format="verbose_json")
        out = raw.parse()
        return (out.text, out.duration), raw.headers["x-busbar-route-target"]


def _openai_speech(url: str, pool: str) -> tuple[Any, str]:
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as c:
        raw = c.audio.speech.with_raw_response.create(model=pool, input="hi", voice="alloy")
        return (raw.headers["content-type"], raw.content), raw.headers["x-busbar-route-target"]


EMBEDDED = [vector(t) for t in TEXTS]
RANKED = [(r["index"], r["relevance_score"]) for r in rerank_results(QUERY, DOCS, None)]
#: row -> (operation, client call, the values every serving lane must produce)
ROWS: dict[str, tuple[str, Callable[[str, str], tuple[Any, str]], Any]] = {
    "openai embeddings.create": ("embeddings", _openai_embed, EMBEDDED),
    "cohere embed": ("embeddings", _cohere_embed, EMBEDDED),
    "google-genai embed_content": ("embeddings", _genai_embed, EMBEDDED),
    "boto3 invoke_model (Titan body)": ("embeddings", _boto3_titan, EMBEDDED[:1]),
    "boto3 invoke_model (Cohere embed body)": ("embeddings", _boto3_cohere_embed, EMBEDDED),
    "cohere rerank": ("rerank", _cohere_rerank, RANKED),
    "boto3 invoke_model (rerank body)": ("rerank", _boto3_rerank, RANKED),
    "openai moderations.create": ("moderation", _openai_moderation, [True, False]),
    "openai images.generate": ("images", _openai_images, [PNG_B64, PNG_B64]),
    "boto3 invoke_model (image body)": ("images", _boto3_image, [PNG_B64, PNG_B64]),
    "openai audio.transcriptions.create": ("audio", _openai_transcribe, (TRANSCRIPT, 1.0)),
    "openai audio.speech.create": ("audio", _openai_speech, ("audio/mpeg", (bytes(range(256)) * 1)[:200])),
}
NOT_FOUND = (openai.NotFoundError, cohere.NotFoundError, genai_errors.ClientError, ClientError)
RESULTS: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(_config(), mock.url, env=KEYS)


@pytest.fixture(scope="module", autouse=True)
def _write_matrix():
    yield
    if len(RESULTS) != len(ROWS) * len(PROVIDERS):
        return
    lines = [MARKER, "",
             "Generated by `tests/operations/test_operation_matrix.py`: each official SDK call of a non-chat",
             "operation (rows) against a pool of two members speaking the provider protocol (columns), through",
             "a real busbar and the mock provider (docs/beyond-chat.md). **V**: the client parsed exactly the",
             "values the upstream computed; **F**: a 503 on the first member failed over to the second.",
             "`404`: the protocol cannot serve the operation and the client got its own native 404 naming it.",
             "`-` marks a failed check.", "",
             "| client call \\ provider | " + " | ".join(PROVIDERS) + " |",
             "|---|" + "---|" * len(PROVIDERS)]
    for row in ROWS:
        lines.append(f"| {row} | " + " | ".join(RESULTS[(row, p)] for p in PROVIDERS) + " |")
    doc = ROOT / "docs" / "protocol-matrix.md"
    head = doc.read_text("utf-8").split("\n" + MARKER, 1)[0].rstrip("\n") if doc.exists() else ""
    doc.write_text((head + "\n\n" if head else "") + "\n".join(lines) + "\n")


@pytest.mark.parametrize("proto", PROVIDERS)
@pytest.mark.parametrize("row", list(ROWS))
def test_operation_cell(gw, mock, row, proto):
    op, call, expected = ROWS[row]
    pool = _pool(list(ROWS).index(row), proto)
    RESULTS[(row, proto)] = "-"
    if (op, proto) not in SERVED or (row, proto) in UNSERVED_CELLS:
        with pytest.raises(NOT_FOUND) as e:
            call(gw.url, pool)
        assert f"no member that can serve {op}" in str(e.value)
        assert mock.requests() == []
        RESULTS[(row, proto)] = "404"
        return
    values, lane = call(gw.url, pool)
    assert (values, lane) == (expected, f"{op}-{proto}-a")
    marks = "V"
    first, _ = SERVED[(op, proto)]
    mock.clear()
    mock.script([{"match": {"model": first}, "times": 1, "response": {"status": 503}}])
    values, lane = call(gw.url, pool)
    assert (values, lane) == (expected, f"{op}-{proto}-b")
    assert len(mock.requests()) == 2
    RESULTS[(row, proto)] = marks + "F"
