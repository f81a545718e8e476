"""The request view's sizes read from the client's body agree with the IR's, or defer to it.

``busbar.hooks.bodyshape.body_sizes`` is a fast path: whenever it answers, the answer must equal
``ir_sizes(read_request(body))`` and the dialect's reader must accept the body without an error (so
a malformed body still gets the same 400 from the IR). Source: docs/hooks.md#what-a-hook-receives.
"""
from __future__ import annotations

import random

import pytest
from busbar.hooks.bodyshape import body_prompt, body_sizes, body_view
from busbar.hooks.projection import ir_sizes, prompt_view
from busbar.proto.errors import ProtoError
from busbar.proto.registry import get_dialect

OPENAI = get_dialect("openai")

SIMPLE = [
    {"messages": [{"role": "user", "content": "hello world"}]},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], "max_tokens": 9},
    {"messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"},
                  {"role": "assistant", "content": ""}, {"role": "user", "content": "again"}],
     "max_completion_tokens": 5, "max_tokens": 7, "stop": ["x"], "user": "u1", "stream": True},
    {"messages": [], "stop": "END", "tools": [], "temperature": 0.1, "unknown_field": {"a": 1}},
    {"messages": [{"role": "assistant", "content": "a", "tool_calls": []}], "stop": None},
    {"messages": [{"role": "user", "content": "h\u00e9llo \U0001f600"}], "max_tokens": "12"},
]

DEFERRED = [
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
    {"messages": [{"role": "tool", "tool_call_id": "c1", "content": "42"}]},
    {"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]},
    {"messages": [{"role": "assistant", "content": "a", "reasoning_content": "think"}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]},
    {"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"},
    {"messages": [{"role": "user", "content": "x"}], "stop": 5},
    {"messages": [{"role": "robot", "content": "x"}]},
    {"messages": [{"role": ["user"], "content": "x"}]},
    {"messages": [{"role": "user", "content": None}]},
    {"messages": ["not an object"]},
    {"messages": "not a list"},
    {"prompt": "legacy"},
]


@pytest.mark.parametrize("body", SIMPLE)
def test_simple_bodies_match_the_ir(body):
    fast = body_sizes(OPENAI, body)
    assert fast is not None
    assert fast == ir_sizes(OPENAI.read_request(body))
    assert body_prompt(OPENAI, body) == prompt_view(OPENAI.read_request(body))
    assert body_view(OPENAI, body) == (ir_sizes(OPENAI.read_request(body)), prompt_view(OPENAI.read_request(body)))


@pytest.mark.parametrize("body", DEFERRED)
def test_other_bodies_defer_to_the_ir(body):
    assert body_sizes(OPENAI, body) is None
    assert body_prompt(OPENAI, body) is None
    assert body_view(OPENAI, body) is None


def test_the_prompt_view_read_from_the_body_exactly():
    body = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": ""},
                         {"role": "developer", "content": "Use SI units."}, {"role": "user", "content": "q1"},
                         {"role": "assistant", "content": ""}, {"role": "user", "content": "q2"}]}
    assert body_prompt(OPENAI, body) == ("Be brief.\nUse SI units.", [
        {"role": "user", "text": "q1"}, {"role": "assistant", "text": ""}, {"role": "user", "text": "q2"}])
    only_empty_system = {"messages": [{"role": "system", "content": ""}, {"role": "user", "content": "x"}]}
    assert body_prompt(OPENAI, only_empty_system) == ("", [{"role": "user", "text": "x"}])
    assert body_prompt(OPENAI, {"messages": [{"role": "user", "content": "x"}]}) == (None, [
        {"role": "user", "text": "x"}])


def test_other_protocols_and_non_objects_defer():
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    for name in ("anthropic", "responses", "gemini", "cohere", "bedrock"):
        assert body_sizes(get_dialect(name), body) is None
        assert body_prompt(get_dialect(name), body) is None
        assert body_view(get_dialect(name), body) is None
    assert body_sizes(OPENAI, [body]) is None
    assert body_view(OPENAI, [body]) is None
    assert body_prompt(OPENAI, [body]) is None


def test_random_bodies_agree_or_defer():
    """Whatever the fast path answers, the IR reader accepts the body and counts the same."""
    rng = random.Random(5)
    roles = ["user", "assistant", "system", "developer", "tool", "robot", None, 3]
    contents = ["", "hi", "h\u00e9llo", "x" * 50, None, 7, [{"type": "text", "text": "p"}], {"a": 1}]
    extras = [("tools", []), ("tools", [{"type": "function", "function": {"name": "f"}}]), ("tool_choice", "none"),
              ("stop", "s"), ("stop", ["a", "b"]), ("stop", 0), ("stop", 9), ("max_tokens", 10),
              ("max_completion_tokens", 3), ("max_tokens", None), ("user", "who"), ("stream_options", 1)]
    answered = 0
    for _ in range(3000):
        msgs = []
        for _ in range(rng.randrange(0, 6)):
            m = {"role": rng.choice(roles), "content": rng.choice(contents)}
            if rng.random() < 0.1:
                m["tool_calls"] = rng.choice([[], None, [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]])
            if rng.random() < 0.1:
                m["reasoning_content"] = rng.choice(["", "r", None, 3])
            if m["role"] == "tool" and rng.random() < 0.7:
                m["tool_call_id"] = "c"
            msgs.append(m)
        body = {"messages": msgs}
        for k, v in rng.sample(extras, rng.randrange(0, 4)):
            body[k] = v
        fast = body_sizes(OPENAI, body)
        if fast is None:
            assert body_prompt(OPENAI, body) is None, body        # all three read exactly the same bodies
            assert body_view(OPENAI, body) is None, body
            continue
        answered += 1
        try:
            ir = OPENAI.read_request(body)
        except (ProtoError, TypeError, ValueError) as e:      # the fast path must never hide an error
            raise AssertionError(f"fast path answered {fast} for a body the reader refuses: {body}: {e}") from e
        assert fast == ir_sizes(ir), body
        assert body_prompt(OPENAI, body) == prompt_view(ir), body
        assert body_view(OPENAI, body) == (fast, prompt_view(ir)), body
    assert answered > 200
