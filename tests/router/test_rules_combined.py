"""busbar_sdk.rules: the combined program decides exactly as the rules one by one, and falls back to
them when a rule cannot be evaluated. Source: docs/router.md#busbar-rules-hook."""
from __future__ import annotations

import itertools

import pytest
from busbar_sdk.rules import Outcome, RuleSet, activation

RULES = [{"when": "req.has_tools", "to": ["agent"]},
         {"when": "req.max_tokens > 1000", "to": ["long"]},          # absent max_tokens: cannot be evaluated
         {"when": "req.total_chars", "to": ["odd"]},                   # an int, not a boolean: never holds
         {"when": 'req.ingress_protocol == "anthropic"', "to": ["claude", "agent"]}]


def requests():
    for tools, mt, proto in itertools.product((True, False), (None, 10, 5000), ("openai", "anthropic")):
        req = {"has_tools": tools, "total_chars": 12, "ingress_protocol": proto}
        if mt is not None:
            req["max_tokens"] = mt
        yield req


@pytest.mark.parametrize("match", ["first", "all"])
def test_combined_equals_rule_by_rule(match) -> None:
    fast = RuleSet({"match": match, "rules": RULES, "default": ["general"]})
    slow = RuleSet({"match": match, "rules": RULES, "default": ["general"]})
    slow.combined = None
    assert fast.combined is not None
    for req in requests():
        act = activation(req)
        assert fast.decide(act) == slow.decide(act), req


def test_expected_outcomes() -> None:
    first = RuleSet({"rules": RULES, "default": ["general"]})
    every = RuleSet({"match": "all", "rules": RULES})
    req = {"has_tools": False, "total_chars": 3, "ingress_protocol": "anthropic", "max_tokens": 4096}
    assert first.decide(activation(req)) == Outcome(("long",), (1,), False)
    assert every.decide(activation(req)) == Outcome(("long", "claude", "agent"), (1, 3), False)
    none = {"has_tools": False, "total_chars": 3, "ingress_protocol": "openai"}
    assert first.decide(activation(none)) == Outcome(("general",), (), True)
    assert every.decide(activation(none)) == Outcome((), (), False)


def test_only_the_fields_the_rules_read_are_built() -> None:
    from busbar_sdk.rules import REQ_FIELDS, fields_of, req_object

    assert fields_of(['req.has_tools && req.prompt.contains("x")', "has(req.max_tokens)"]) == {
        "has_tools", "prompt", "max_tokens"}
    assert fields_of(['req["prompt"].size() > 3']) == REQ_FIELDS        # not as req.<field>: build everything
    request = {"pool": "p", "has_tools": True, "stream": False, "messages": [{"role": "user", "text": "hi"}]}
    assert req_object(request, [{"idx": 0, "model": "m"}], frozenset({"has_tools", "prompt"})) == {
        "has_tools": True, "prompt": "hi"}
    assert req_object(request, [{"idx": 0, "model": "m"}]) == {
        "pool": "p", "has_tools": True, "stream": False, "prompt": "hi", "candidates": [{"idx": 0, "model": "m"}]}
