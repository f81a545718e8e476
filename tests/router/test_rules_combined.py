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


def test_header_literals_are_checked_against_the_allowlist() -> None:
    from busbar_sdk.rules import RulesError, check_headers, header_refs, req_object

    assert header_refs("req.headers['x-a'] == 'b' && \"x-c\" in req.headers || req.headers[\"X-D\"] == ''") == [
        "x-a", "X-D", "x-c"]
    rules = RuleSet({"rules": [{"when": "req.headers['x-tenant'] == 'acme'", "to": ["a"]},
                               {"when": "req.headers['X-Tier'] == 'gold'", "to": ["b"]}]}).rules
    check_headers(rules[:1], ("x-tenant",), "settings", "settings.headers")            # fine: listed
    with pytest.raises(RulesError) as e:
        check_headers(rules, ("x-tenant", "x-tier"), "settings", "settings.headers")
    assert str(e.value) == ("settings.rules[1].when: header names in req.headers are lower-case; write 'x-tier', "
                            "not 'X-Tier'")
    with pytest.raises(RulesError) as e:
        check_headers(rules, ("x-tenant",), "settings", "settings.headers")
    assert str(e.value) == ("settings.rules[1].when: reads header 'X-Tier', which settings.headers does not list "
                            "(x-tenant); add it there")
    with pytest.raises(RulesError) as e:
        check_headers(rules, (), "settings.fallback[0]", "settings.state.headers")
    assert str(e.value) == ("settings.fallback[0].rules[0].when: reads req.headers but settings.state.headers lists "
                            "no header; only the headers listed there are projected")
    request = {"pool": "p", "headers": {"x-tenant": "acme"}}
    req = req_object(request, [], frozenset({"headers"}))
    assert req == {"headers": {"x-tenant": "acme"}}
    first = RuleSet({"rules": [{"when": "req.headers['x-tenant'] == 'acme'", "to": ["a"]}], "default": ["d"]})
    assert first.decide(req) == Outcome(("a",), (0,), False)
    assert first.decide({"headers": {}}) == Outcome(("d",), (), True)            # a missing key: does not hold
    assert first.decide(activation(req)) == Outcome(("a",), (0,), False)
