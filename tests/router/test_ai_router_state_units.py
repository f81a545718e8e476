"""busbar-ai-router-hook pieces without a gateway: the state (headers, redaction, the max_bytes cut order),
the generative engine's answer decoder (unknown names dropped, bad output refused), and the cache and
budget over a shared state (the kernel's handle on a real store, two instances standing for two
processes): fleet-wide counts, the two cache levels, a store fault falling back to the process.

The plugin is imported from its source tree for this module only (and forgotten after), so tests that
load the signed tarball in-process are not refused for a package the environment could import.

Source: docs/router.md#busbar-ai-router-hook, docs/router.md#the-generative-engine.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "plugins" / "busbar-ai-router-hook" / "src")


@pytest.fixture(scope="module")
def mods() -> Iterator[SimpleNamespace]:
    sys.path.insert(0, SRC)
    try:
        from busbar_ai_router_hook import _generative, _guards, _settings, _state

        yield SimpleNamespace(state=_state, gen=_generative, settings=_settings, guards=_guards)
    finally:
        sys.path.remove(SRC)
        for name in [m for m in sys.modules if m == "busbar_ai_router_hook" or m.startswith("busbar_ai_router_hook.")]:
            del sys.modules[name]


def test_allowlisted_headers_join_the_state_and_redaction_applies_to_them(mods) -> None:
    from jsonpath_ng.ext import parse

    request = {"system": "be brief", "headers": {"x-tier": "gold", "x-secret": "s3", "x-other": "no"},
               "messages": [{"role": "user", "text": "hi"}]}
    state = mods.state.build_state(request, (parse('$.headers."x-secret"'),), 8192, ("x-tier", "x-secret", "x-gone"))
    assert state == {"system": "be brief", "headers": {"x-tier": "gold"}, "messages": [{"role": "user", "text": "hi"}]}
    assert mods.state.state_text(state) == ("hi", "x-tier: gold\nbe brief")
    assert "headers" not in mods.state.build_state(request, (), 8192, ())


def test_the_cut_drops_old_turns_then_system_then_headers_before_the_current_message(mods) -> None:
    request = {"system": "s" * 40, "headers": {"x-tier": "t" * 40},
               "messages": [{"role": "user", "text": "old " * 30}, {"role": "assistant", "text": "mid " * 30},
                            {"role": "user", "text": "now " * 20}]}
    sizes = []
    for max_bytes in (400, 300, 200, 130, 100):
        state = mods.state.build_state(request, (), max_bytes, ("x-tier",))
        assert mods.state.state_bytes(state) <= max_bytes
        sizes.append((sorted(k for k in state if k != "messages"), len(state["messages"]),
                      len(state["messages"][-1]["text"])))
    assert sizes == [(["headers", "system"], 2, 80), (["headers", "system"], 1, 80), (["headers"], 1, 80),
                     ([], 1, 80), ([], 1, 52)]


@pytest.mark.parametrize(("content", "error"), [
    ("Hello from r-small.", "not JSON: 'Hello from r-small.'"),
    ("[1]", "not a JSON object"),
    ('{"destinations": "code", "confidence": 1, "reason": ""}', "destinations: not a list of names"),
    ('{"destinations": ["code"], "confidence": 1.5, "reason": ""}', "confidence: 1.5 is not a number in 0..1"),
    ('{"destinations": ["code"], "confidence": true, "reason": ""}', "confidence: True is not a number in 0..1"),
    ('{"destinations": ["gpt-9"], "confidence": 0.9, "reason": ""}', "no candidate named (only gpt-9)"),
    (None, "the reply has no text content"),
    ("[" * 100_000, "not JSON: '" + "[" * 80 + "'"),     # past the parser's depth: RecursionError escaped
])
def test_bad_output_is_refused_with_its_reason(mods, content, error) -> None:
    with pytest.raises(ValueError) as e:
        mods.gen.parse_answer(content, ("code", "math"))
    assert str(e.value) == error


def test_unknown_names_are_dropped_and_duplicates_kept_once(mods) -> None:
    a = mods.gen.parse_answer(json.dumps({"destinations": ["math", "gpt-9", "math", "code"], "confidence": 0.75,
                                          "reason": "both"}), ("code", "math"))
    assert (a.destinations, a.dropped, a.confidence, a.reason) == (["math", "code"], ["gpt-9"], 0.75, "both")
    empty = mods.gen.parse_answer('{"destinations": [], "confidence": 0.2, "reason": "unsure"}', ("code",))
    assert (empty.destinations, empty.dropped) == ([], [])


def test_settings_name_the_generative_faults(mods) -> None:
    base = {"engine": "generative", "gateway_url": "http://127.0.0.1:8080", "pool": "llms", "model": "a",
            "candidates": [{"name": "x", "description": "X"}, {"name": "y", "description": "Y"}]}
    s = mods.settings.parse(base | {"fallback_models": ["b"], "retry": {"attempts": 3, "backoff": 5, "max": 20}})
    assert s.generative == mods.settings.Generative("http://127.0.0.1:8080/v1/chat/completions", None, "llms",
                                                    ("a", "b"), 3, 5, 20)
    for extra, error in [
        ({"fallback_models": ["a"]}, "settings.fallback_models: 'a' is named twice (model and fallback_models)"),
        ({"retry": {"attempts": 0}}, "settings.retry.attempts: must be an integer >= 1, found 0"),
        ({"retry": {"jitter": 1}}, "settings.retry.jitter: not a retry setting (known: attempts, backoff, max)"),
        ({"gateway_url": "http://[::1]:8080/x?y=1"}, "settings.gateway_url: 'http://[::1]:8080/x?y=1' is not this "
         "gateway's own listener; use http(s)://127.0.0.1:<port> (a loopback address: the router's calls go through "
         "this gateway's pools)"),
        ({"gateway_key": "sk-literal"}, "settings.gateway_key: must be { env: NAME } or { file: PATH } (a key is "
         "never written into the config)"),
        ({"min_margin": 0.1}, "settings.min_margin: not a setting of engine: generative (the generative engine "
         "reports one confidence (no softmax, no runner-up))"),
    ]:
        with pytest.raises(mods.settings.SettingsError) as e:
            mods.settings.parse(base | extra)
        assert str(e.value) == error


def test_cel_settings_read_only_the_headers_settings_headers_lists(mods) -> None:
    base = {"candidates": [{"name": "x", "description": "X"}, {"name": "y", "description": "Y"}]}
    gated = mods.settings.parse(base | {"headers": ["X-Tier"], "when": "req.headers['x-tier'] == 'gold'",
                                        "fallback": [{"rules": [{"when": "'x-tier' in req.headers", "to": ["x"]}]}]})
    assert "headers" in gated.req_fields and gated.headers == ()
    for extra, error in [
        ({"when": "req.headers['x-tier'] == 'gold'"},
         "settings.when: reads req.headers but settings.headers lists no header; only the headers listed there are "
         "projected"),
        ({"headers": ["x-tier"], "cache": {"key": "req.headers['x-user']"}},
         "settings.cache.key: reads header 'x-user', which settings.headers does not list (x-tier); add it there"),
        ({"headers": ["x-tier"], "fallback": [{"rules": [{"when": "req.headers['x-a'] == 'b'", "to": ["x"]}]}]},
         "settings.fallback[0].rules[0].when: reads header 'x-a', which settings.headers does not list (x-tier); "
         "add it there"),
        ({"headers": ["x-tier", 3]}, "settings.headers[1]: 3 is not a request header name (letters, digits and "
                                     "!#$%&'*+.^_`|~-)"),
    ]:
        with pytest.raises(mods.settings.SettingsError) as e:
            mods.settings.parse(base | extra)
        assert str(e.value) == error
    with pytest.raises(mods.settings.SettingsError) as e:
        mods.settings.parse(base | {"state": {"headers": ["Authorization"]}})
    assert str(e.value) == ("settings.state.headers[0]: 'Authorization' carries a credential; credentials are never "
                            "projected to a hook (authorization, proxy-authorization, x-api-key, x-goog-api-key, "
                            "api-key, cookie, set-cookie, x-amz-*): remove it")


def test_a_redacted_message_text_reads_as_empty_instead_of_failing_every_decision(mods) -> None:
    """``redact: ["$.messages[0].text"]`` removed the key the size check then read: a KeyError on
    every request, so the AI step always failed over to the fallback chain."""
    from jsonpath_ng.ext import parse

    request = {"messages": [{"role": "user", "text": "my card is 4111"}, {"role": "assistant", "text": "ok"},
                            {"role": "user", "text": "route me"}]}
    state = mods.state.build_state(request, (parse("$.messages[0].text"), parse("$.messages[1].role")), 8192)
    assert state == {"messages": [{"role": "user", "text": ""}, {"text": "ok", "role": ""},
                                  {"role": "user", "text": "route me"}]}
    assert mods.state.state_text(state) == ("route me", "ok")
    small = mods.state.build_state(request, (parse("$.messages[0].text"),), 80)      # the cut path too
    assert small == {"messages": [{"role": "user", "text": "route me"}]}


# ------------------------------------------------------------------ cache and budget over shared state

@pytest.fixture
def shared_store() -> Iterator[SimpleNamespace]:
    """A kernel StoreState factory on a MemoryStore served by a running loop (``new()``: one more
    instance handle in the same namespace, as another process would hold), and the bridge."""
    from busbar.store.shared import StoreState
    from busbar_sdk.store import MemoryStore

    from tests.store.test_shared_state import Loop

    loop = Loop()
    bridge = loop.bridge(MemoryStore())
    yield SimpleNamespace(bridge=bridge, loop=loop,
                          new=lambda: StoreState(bridge, "hook:busbar-ai-router-hook:0123456789abcdef"))
    loop.close()


def _shared(mods, state):  # type: ignore[no-untyped-def]
    sh = mods.guards.Shared()
    sh.state = state
    return sh


def test_the_call_budget_is_counted_once_for_every_process(mods, shared_store) -> None:
    one = mods.guards.Budget(2, None, _shared(mods, shared_store.new()))
    two = mods.guards.Budget(2, None, _shared(mods, shared_store.new()))
    assert [one.admit(), two.admit(), two.admit(), one.admit()] == [True, True, False, False]
    assert (one.calls, two.calls) == (1, 1)                    # each process's own share
    tokens = [mods.guards.Budget(None, 100, _shared(mods, shared_store.new())) for _ in range(2)]
    assert tokens[0].admit() is True
    tokens[0].spend(120)                                       # the fleet's hour is spent
    assert tokens[1].admit() is False
    assert tokens[1].tokens == 0 and tokens[0].tokens == 120


def test_a_decision_cached_by_one_process_is_served_from_the_store_by_the_other(mods, shared_store) -> None:
    enc, dec = mods.gen.encode_hit, mods.gen.decode_hit
    a = mods.guards.Cache(10, 600, _shared(mods, shared_store.new()), "scope1", enc, dec)
    b = mods.guards.Cache(10, 600, _shared(mods, shared_store.new()), "scope1", enc, dec)
    other = mods.guards.Cache(10, 600, _shared(mods, shared_store.new()), "scope2", enc, dec)
    assert b.get("k") == (None, None)
    a.put("k", {"math": 0.75, "code": 0.25})
    assert a.get("k") == ({"math": 0.75, "code": 0.25}, "local")
    assert b.get("k") == ({"math": 0.75, "code": 0.25}, "store")
    assert b.get("k") == ({"math": 0.75, "code": 0.25}, "local")      # the store hit filled the LRU
    assert other.get("k") == (None, None)                           # other settings: another scope
    answer = mods.gen.Answer(["math"], 0.9, "equations", ["nope"], "gpt", "lane-1", 1, 42)
    a.put("g", answer)
    assert b.get("g") == (answer, "store")
    off = mods.guards.Cache(0, 600, _shared(mods, shared_store.new()), "scope1", enc, dec)
    assert off.get("k") == (None, None)                             # size 0: no cache at all


def test_cached_decisions_decode_or_are_refused(mods) -> None:
    gen = mods.gen
    assert gen.decode_hit(gen.encode_hit({"a": 1})) == {"a": 1.0}
    for bad in ({"scores": {"a": "x"}}, {"answer": {"destinations": ["a"]}}, {"answer": {"nope": 1}}, [], None):
        with pytest.raises(ValueError):
            gen.decode_hit(bad)


def test_a_store_fault_falls_back_to_the_process_counted_and_logged_once(mods, shared_store, caplog) -> None:
    clock = [1000.0]
    sh = mods.guards.Shared(clock=lambda: clock[0])
    sh.state = shared_store.new()
    shared_store.bridge.stop()                                      # the gateway stopped its store
    budget = mods.guards.Budget(1, None, sh)
    cache = mods.guards.Cache(10, 600, sh, "s", mods.gen.encode_hit, mods.gen.decode_hit)
    with caplog.at_level("WARNING", logger="busbar.router"):
        assert [budget.admit(), budget.admit()] == [True, False]   # this process's own budget
        cache.put("k", {"a": 1.0})
        assert cache.get("k") == ({"a": 1.0}, "local")
        assert cache.get("z") == (None, None)
        assert sh.error_counts() == {"budget": 1}                   # then the store is left alone for 5 s
        clock[0] += 5.0
        assert cache.get("z") == (None, None)                       # tried again: fails again
    assert sh.error_counts() == {"budget": 1, "cache_get": 1}
    warnings = [r.getMessage() for r in caplog.records if r.name == "busbar.router"]
    assert warnings == ["busbar-ai-router-hook: the shared store failed (budget: SharedStateError: shared state: "
                        "the store is not running); this process's own cache and budget serve meanwhile (counted "
                        "in router_store_errors_total)"]


def test_what_was_counted_while_the_store_was_out_reaches_the_fleet_when_it_answers(mods, shared_store) -> None:
    clock = [1000.0]
    sh = mods.guards.Shared(clock=lambda: clock[0])
    sh.state = shared_store.new()
    budget = mods.guards.Budget(5, 1000, sh)
    shared_store.bridge.stop()                                      # the store is out
    assert budget.admit() is True                                   # this process's budget: counted here
    budget.spend(600)
    assert (budget.calls, budget.tokens, budget.unsent_calls, budget.unsent_tokens) == (1, 600, 1, 600)
    lp = shared_store.loop
    lp.loop.call_soon_threadsafe(shared_store.bridge.start, lp.loop)  # back
    lp.run(__import__("asyncio").sleep(0))
    clock[0] += 5.0
    budget.spend(100)                                               # reaches the store: with what it missed
    fleet = shared_store.new()
    assert (fleet.count("calls", 60), fleet.count("tokens", 3600)) == (1, 700)
    assert (budget.unsent_calls, budget.unsent_tokens) == (0, 0)
    other = mods.guards.Budget(5, 1000, _shared(mods, shared_store.new()))
    other.spend(300)
    assert other.admit() is False                                   # the fleet's hour: 1000 spent


class _Slow:
    """A real shared state whose every answer takes ``delay`` s on the guards' clock (a store under load)."""

    def __init__(self, state, clock, delay):  # type: ignore[no-untyped-def]
        self.state, self.clock, self.delay = state, clock, delay

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        fn = getattr(self.state, name)

        def slow(*args):  # type: ignore[no-untyped-def]
            self.clock[0] += self.delay
            return fn(*args)
        return slow


def test_a_slow_store_costs_one_operation_then_is_left_alone(mods, shared_store, caplog) -> None:
    clock = [1000.0]
    sh = mods.guards.Shared(clock=lambda: clock[0])
    sh.state = _Slow(shared_store.new(), clock, 0.2)               # answers, in 200 ms each
    budget = mods.guards.Budget(5, 1000, sh)
    cache = mods.guards.Cache(10, 600, sh, "s", mods.gen.encode_hit, mods.gen.decode_hit)
    with caplog.at_level("WARNING", logger="busbar.router"):
        assert cache.get("k") == (None, None)                       # the store answered (slowly): a miss
        assert budget.admit() is True                               # this process's budget: store left alone
        budget.spend(10)
        cache.put("k", {"a": 1.0})
    assert clock[0] == 1000.2                                       # one slow operation, not five
    assert sh.error_counts() == {"cache_get": 1}
    assert [r.getMessage() for r in caplog.records if r.name == "busbar.router"] == [
        "busbar-ai-router-hook: the shared store failed (cache_get: answered in 200 ms, over 100 ms); this "
        "process's own cache and budget serve meanwhile (counted in router_store_errors_total)"]
