"""Hypothesis fuzz of every ingress route through a real busbar process (issue 11 item 14).

Every protocol route (all six protocols, body-model, path-model and ad-hoc forms, JSON and stream
verbs) gets generated JSON bodies shaped like that family of protocols (valid-ish structure with
wrong types, odd values and unknown keys mixed in) and raw bytes, aimed at pools of every egress
protocol behind the mock provider. Whatever the body:

- the status is < 500, or one of the documented upstream-fault answers 502/503;
- no Python exception class name and no traceback appear in the reply;
- the upstream's ``127.0.0.1:<port>`` appears in no reply header or body.

Bounded (``FUZZ_EXAMPLES`` per route and body kind) and derandomized so the suite stays fast and
repeatable; ``BUSBAR_FUZZ_EXAMPLES=<n>`` runs more examples, ``BUSBAR_FUZZ_RANDOM=1`` new ones.
"""
from __future__ import annotations

import builtins
import json
import os
import re
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

PROTOCOLS = ("openai", "responses", "anthropic", "gemini", "bedrock", "cohere")
POOLS = [f"to-{p}" for p in PROTOCOLS]
FUZZ_EXAMPLES = int(os.environ.get("BUSBAR_FUZZ_EXAMPLES", "12"))

CONFIG = "listen: \"127.0.0.1:{port}\"\nproviders:\n" + "".join(
    f"  up-{p}: {{ protocol: {p}, base_url: MOCK, api_key: {{ env: KEY_{p.upper()} }} }}\n" for p in PROTOCOLS
) + "models:\n" + "".join(
    f"  m-{p}: {{ provider: up-{p}, default_max_tokens: 64 }}\n" for p in PROTOCOLS
) + "pools:\n" + "".join(
    f"  to-{p}: {{ members: [ {{ model: m-{p} }} ], breaker: {{ trip: {{ mode: consecutive, "
    f"consecutive_n: 1000000 }} }} }}\n" for p in PROTOCOLS)
KEYS = {"KEY_OPENAI": "sk-o", "KEY_RESPONSES": "sk-r", "KEY_ANTHROPIC": "sk-ant-api-a", "KEY_GEMINI": "g-key",
        "KEY_BEDROCK": "AKIDEXAMPLE:secretkey", "KEY_COHERE": "co-key"}

# Python exception class names (builtins and the libraries on the request path) and "Traceback".
_EXC_NAMES = sorted({n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
                    | {"JSONDecodeError", "JSONEncodeError", "ClientError", "ClientConnectorError",
                       "ClientResponseError", "ClientPayloadError", "ServerDisconnectedError", "ClientOSError",
                       "ValidationError", "HTTPException", "CancelledError", "InvalidStateError", "Traceback"})
EXC_RE = re.compile(r"\b(" + "|".join(_EXC_NAMES) + r")\b")

# -- generated bodies -----------------------------------------------------------------------------
# Text never holds ASCII capitals: the mock echoes prompts, and a generated "TypeError" in an echo
# must not read as a leak.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Lu")), max_size=12)
LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70),
                 st.floats(allow_nan=False, allow_infinity=False), TEXT)
ANY = st.recursive(LEAF, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(TEXT, c, max_size=3)),
                   max_leaves=12)
TYPES = st.sampled_from(["text", "image", "image_url", "input_text", "input_image", "output_text", "tool_use",
                         "tool_result", "function", "function_call", "function_call_output", "message",
                         "reasoning", "thinking", "redacted_thinking", "document", "json_schema", "json_object",
                         "auto", "any", "none", "required", "tool", "file", "input_audio"])
ROLES = st.sampled_from(["user", "assistant", "system", "developer", "tool", "model", "chatbot"])


def _maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly ``strategy``, sometimes any JSON value (a wrong type)."""
    return st.one_of(strategy, strategy, ANY)


PART = st.fixed_dictionaries({}, optional={
    "type": _maybe(TYPES), "text": _maybe(TEXT), "id": _maybe(TEXT), "name": _maybe(TEXT),
    "input": ANY, "arguments": _maybe(TEXT), "call_id": _maybe(TEXT), "output": _maybe(TEXT),
    "tool_use_id": _maybe(TEXT), "content": ANY, "source": ANY, "image_url": ANY, "thinking": _maybe(TEXT),
    "signature": _maybe(TEXT), "encrypted_content": _maybe(TEXT), "summary": ANY,
    "inlineData": ANY, "inline_data": ANY, "functionCall": ANY, "functionResponse": ANY, "fileData": ANY,
    "image": ANY, "document": ANY, "cachePoint": ANY, "reasoningContent": ANY,
    "toolUse": _maybe(st.fixed_dictionaries({}, optional={"toolUseId": _maybe(TEXT), "name": _maybe(TEXT),
                                                          "input": ANY})),
    "toolResult": _maybe(st.fixed_dictionaries({}, optional={
        "toolUseId": _maybe(TEXT), "status": _maybe(TEXT),
        "content": _maybe(st.lists(st.fixed_dictionaries({}, optional={"text": ANY, "json": ANY}),
                                   max_size=2))})),
})
CONTENT = st.one_of(TEXT, st.lists(PART, max_size=3), ANY)
MESSAGE = st.fixed_dictionaries({}, optional={
    "role": _maybe(ROLES), "content": CONTENT, "parts": _maybe(st.lists(PART, max_size=3)),
    "tool_calls": _maybe(st.lists(st.fixed_dictionaries({}, optional={
        "id": _maybe(TEXT), "type": _maybe(TYPES), "function": ANY}), max_size=2)),
    "tool_call_id": _maybe(TEXT), "name": _maybe(TEXT), "type": _maybe(TYPES),
})
MESSAGES = _maybe(st.lists(MESSAGE, max_size=3))
TOOLS = _maybe(st.lists(st.fixed_dictionaries({}, optional={
    "type": _maybe(TYPES), "name": _maybe(TEXT), "description": _maybe(TEXT), "input_schema": ANY,
    "parameters": ANY, "function": ANY, "functionDeclarations": ANY, "toolSpec": ANY}), max_size=2))
COMMON = {
    "stream": _maybe(st.booleans()), "max_tokens": _maybe(st.integers(-5, 100)), "temperature": ANY,
    "top_p": ANY, "stop": ANY, "stop_sequences": ANY, "tools": TOOLS, "tool_choice": ANY, "metadata": ANY,
    "user": ANY, "n": ANY, "seed": ANY, "response_format": ANY, "stream_options": ANY, "reasoning": ANY,
    "reasoning_effort": ANY, "thinking": ANY, "system": _maybe(st.one_of(TEXT, st.lists(PART, max_size=2))),
    "unknown_field": ANY,
}
FAMILY_KEYS = {
    "openai": {"messages": MESSAGES, "max_completion_tokens": ANY, "parallel_tool_calls": ANY},
    "responses": {"input": _maybe(st.one_of(TEXT, st.lists(st.one_of(MESSAGE, PART), max_size=3))),
                  "instructions": ANY, "max_output_tokens": ANY, "previous_response_id": ANY, "store": ANY,
                  "include": ANY, "text": ANY},
    "anthropic": {"messages": MESSAGES, "top_k": ANY, "anthropic_version": ANY},
    "cohere": {"messages": MESSAGES, "documents": ANY, "response_format": ANY, "safety_mode": ANY},
    "gemini": {"contents": MESSAGES, "systemInstruction": ANY, "system_instruction": ANY,
               "generationConfig": ANY, "generation_config": ANY, "toolConfig": ANY, "safetySettings": ANY},
    "bedrock": {"messages": MESSAGES, "inferenceConfig": ANY, "toolConfig": ANY,
                "additionalModelRequestFields": ANY, "anthropic_version": ANY, "prompt": ANY},
}


def body_for(family: str, model_in_body: bool) -> st.SearchStrategy:
    keys = {**COMMON, **FAMILY_KEYS[family]}
    if model_in_body:
        keys["model"] = st.one_of(st.sampled_from(POOLS), st.sampled_from(POOLS), ANY)
    return st.fixed_dictionaries({}, optional=keys)


RAW = st.one_of(st.binary(max_size=64), st.sampled_from([b"", b"null", b"[]", b"{", b'{"model":', b"\xff\xfe",
                                                         b'{"model":"to-openai"}' * 2, b"1e999"]))

# -- routes ---------------------------------------------------------------------------------------
NAME = st.one_of(st.sampled_from(POOLS), st.sampled_from(POOLS), TEXT.filter(bool))


def _q(name: str) -> str:
    return quote(name, safe="")


ROUTES = {   # id -> (protocol family, model in body?, path strategy)
    "openai": ("openai", True, st.just("/v1/chat/completions")),
    "responses": ("responses", True, st.just("/v1/responses")),
    "cohere-v2": ("cohere", True, st.just("/v2/chat")),
    "cohere-v1": ("cohere", True, st.just("/v1/chat")),
    "anthropic": ("anthropic", True, st.just("/v1/messages")),
    "anthropic-path": ("anthropic", False, NAME.map(lambda n: f"/{_q(n)}/v1/messages")),
    "anthropic-adhoc": ("anthropic", False, st.tuples(st.sampled_from([f"up-{p}" for p in PROTOCOLS]), TEXT.filter(
        bool)).map(lambda pm: f"/{pm[0]}/{_q(pm[1])}/v1/messages")),
    "gemini": ("gemini", False, NAME.map(lambda n: f"/v1beta/models/{_q(n)}:generateContent")),
    "gemini-stream": ("gemini", False, st.tuples(NAME, st.sampled_from(["", "?alt=sse"])).map(
        lambda na: f"/v1beta/models/{_q(na[0])}:streamGenerateContent{na[1]}")),
    "bedrock": ("bedrock", False, NAME.map(lambda n: f"/model/{_q(n)}/converse")),
    "bedrock-stream": ("bedrock", False, NAME.map(lambda n: f"/model/{_q(n)}/converse-stream")),
    "bedrock-invoke": ("bedrock", False, NAME.map(lambda n: f"/model/{_q(n)}/invoke")),
    "bedrock-invoke-stream": ("bedrock", False, NAME.map(lambda n: f"/model/{_q(n)}/invoke-with-response-stream")),
}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url, env=KEYS)


@pytest.fixture(scope="module")
def client(gw):
    with httpx.Client(base_url=gw.url, timeout=30) as c:
        yield c


def _check(client: httpx.Client, mock_url: str, path: str, content: bytes) -> None:
    r = client.post(path, content=content, headers={"content-type": "application/json"})
    text = r.content.decode("utf-8", "replace")
    where = f"POST {path} {content[:300]!r} -> {r.status_code} {text[:500]}"
    assert r.status_code < 500 or r.status_code in (502, 503), where
    leak = EXC_RE.search(text) or EXC_RE.search(" ".join(r.headers.values()))
    assert leak is None, f"exception class {leak.group(0)!r} in the reply: {where}"
    upstream = mock_url.removeprefix("http://")
    assert upstream not in text and upstream not in " ".join(r.headers.values()), where


FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=not os.environ.get("BUSBAR_FUZZ_RANDOM"),
                database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])


# Bodies the fuzz once found failing, replayed on every run: route -> [(path, body)].
REGRESSIONS: dict[str, list[tuple[str, dict]]] = {
    "gemini-stream": [("/v1beta/models/to-gemini:streamGenerateContent", {"contents": [{}]})],   # was 500
    "anthropic-adhoc": [("/up-anthropic/%C4%81/v1/messages",                                   # was 500
                         {"messages": [{}], "max_tokens": 1})],
    "bedrock": [("/model/to-openai/converse",                                                  # was 500
                 {"messages": [{"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [{}]}}]}]})],
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_generated_json_bodies(route, client, mock):
    family, model_in_body, paths = ROUTES[route]

    def run(path: str, body: dict) -> None:
        _check(client, mock.url, path, json.dumps(body).encode())

    for path, body in REGRESSIONS.get(route, []):
        run = example(path=path, body=body)(run)
    FUZZ(given(path=paths, body=body_for(family, model_in_body))(run))()


@pytest.mark.parametrize("route", list(ROUTES))
def test_raw_bytes(route, client, mock):
    _, _, paths = ROUTES[route]

    @FUZZ
    @given(path=paths, raw=RAW)
    def run(path: str, raw: bytes) -> None:
        _check(client, mock.url, path, raw)

    run()
