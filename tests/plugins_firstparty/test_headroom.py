"""busbar-headroom-hook, loaded from its signed tarball: it compresses what it can prove is the whole
request, abstains on everything else, never corrupts a request, and reports what it saved.

Source: docs/hooks-firstparty.md (Headroom), docs/hooks.md#what-a-gate-may-answer (rewrite:
body form, not index-aligned), "Management messages" (status metrics, configure ack).
"""
from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from busbar_sdk import sidecar
from busbar_sdk.testing import assert_hook_conformance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins_firstparty.conftest import plugin_module
from tests.plugins_firstparty.support import REPO, per_request, prompt_request

LOG = "\n".join(f"2026-01-01 12:00:{i % 60:02d} INFO  worker-{i % 7}   processed batch {i}   status=ok   "
                for i in range(120))


def agent_history() -> list[tuple[str, str]]:
    """A text-only agent session: the same log pasted twice, chatter, and a long stale output."""
    big = "\n".join(f"line {i}: " + "x" * 60 for i in range(200))
    return [
        ("user", "Here is the build log:\n\n```\n" + LOG + "\n```\n\n\n\nWhat   failed?   "),
        ("assistant", "Nothing   failed.\n\n\n\nAll   batches   report status=ok."),
        ("user", "And the full dump of the table:\n```text\n" + big + "\n```\nanything odd?"),
        ("assistant", "No anomalies in the table."),
        ("user", "Re-running. Same log again:\n\n```\n" + LOG + "\n```"),
        ("assistant", "Still all ok."),
        ("user", "Great. Summarize    the session in one sentence."),
    ]


@pytest.fixture
def headroom(load_plugin):
    return load_plugin("headroom")


def transform(messages: list[tuple[str, str]], **fields) -> dict:
    return per_request("transform", prompt_request(messages, system="You are terse.", **fields),
                       [{"idx": 0, "model": "claude-sonnet"}])


def test_manifest(headroom) -> None:
    m = headroom.manifest
    assert (m.name, m.alias, m.kind, m.version, m.publisher) == (
        "busbar-headroom-hook", "busbar-headroom", "hook", "1.5.0", "busbar")
    assert m.needs.prompt == "rw" and json.loads(m.settings_schema)["additionalProperties"] is False


def test_conformance(headroom) -> None:
    inst = headroom.open({})
    assert_hook_conformance(inst)
    assert inst.call({"describe": True})["schema"]["title"] == "busbar-headroom-hook settings"


def test_compresses_a_text_only_history_without_changing_its_shape(headroom) -> None:
    history = agent_history()
    inst = headroom.open({})
    reply = inst.call(transform(history))
    messages = reply["rewrite"]["messages"]
    assert set(reply) == {"rewrite"} and set(reply["rewrite"]) == {"messages"}
    assert [m["role"] for m in messages] == [r for r, _ in history]
    assert messages[-1]["content"] == history[-1][1]  # the ask is never touched
    assert all(isinstance(m["content"], str) and m["content"].strip() for m in messages)
    first, stale = messages[0]["content"], messages[2]["content"]
    assert "[headroom: repeated verbatim in message 5 below;" in first
    assert first.startswith("Here is the build log:") and first.rstrip().endswith("What failed?")
    assert "chars of stale output omitted]" in stale and stale.startswith("And the full dump of the table:\n```text\n")
    assert "line 0: " in stale and "line 199: " in stale and stale.rstrip().endswith("anything odd?")
    assert messages[1]["content"] == "Nothing failed.\n\nAll batches report status=ok."
    assert LOG.replace("   \n", "\n").rstrip() in messages[4]["content"]  # the latest copy is kept whole
    before = sum(len(t) for _, t in history)
    after = sum(len(m["content"]) for m in messages)
    assert after < before * 0.6

    status = inst.call({"status": True})["status"]
    by_name = {(m["name"], tuple(sorted((m.get("labels") or {}).items()))): m for m in status["metrics"]}
    assert by_name[("chars_saved_total", (("pool", "smart"),))]["value"] == before - after
    assert by_name[("headroom_rewrites_total", (("pool", "smart"),))]["value"] == 1
    assert by_name[("tokens_saved_total", (("pool", "smart"),))]["estimated"] is True
    assert {("headroom_chars_saved_by_method_total", (("method", m),)) for m in ("dedup", "truncate", "whitespace")} \
        <= set(by_name)
    assert by_name[("headroom_latency_us", ())]["value"] == 1

    # compressing the rewritten body again finds nothing worth a rewrite: it abstains
    again = [(m["role"], m["content"]) for m in messages]
    assert inst.call(transform(again)) == {}


@pytest.mark.parametrize(("change", "reason"), [
    (lambda h, f: f.update(has_tools=True), "tools"),
    (lambda h, f: h.insert(1, ("tool", "{\"result\": 1}")), "roles"),
    (lambda h, f: h.insert(1, ("developer", "be nice")), "roles"),
    (lambda h, f: h.insert(1, ("user", "")), "non_text_turn"),
    (lambda h, f: h.insert(1, ("assistant", "[busbar:redacted_reasoning] then text")), "redacted_reasoning"),
])
def test_abstains_when_a_text_rewrite_could_lose_content(headroom, change, reason) -> None:
    history, fields = agent_history(), {}
    change(history, fields)
    inst = headroom.open({})
    assert inst.call(transform(history, **fields)) == {}
    abstained = {m["labels"]["reason"]: m["value"] for m in inst.call({"status": True})["status"]["metrics"]
                 if m["name"] == "headroom_abstained_total"}
    assert abstained == {reason: 1}


def test_abstains_on_short_chats_missing_grants_and_decide(headroom) -> None:
    inst = headroom.open({})
    assert inst.call(transform([("user", "hi"), ("assistant", "hello   there"), ("user", "bye")])) == {}
    no_prompt = per_request("transform", {"request_id": "r", "pool": "p", "message_count": 3, "has_tools": False,
                                          "total_chars": 90000, "stream": False})
    assert inst.call(no_prompt) == {}
    assert inst.call(per_request("decide", prompt_request(agent_history()))) == {}
    abstained = {m["labels"]["reason"]: m["value"] for m in inst.call({"status": True})["status"]["metrics"]
                 if m["name"] == "headroom_abstained_total"}
    assert abstained == {"too_short": 1, "no_prompt": 1}


def test_thresholds_and_switches_are_settings(headroom) -> None:
    inst = headroom.open({"min_savings_pct": 90})
    assert inst.call(transform(agent_history())) == {}
    inst = headroom.open({"dedup_min_chars": 0, "truncate_over_chars": 0, "min_savings_pct": 0})
    contents = [m["content"] for m in inst.call(transform(agent_history()))["rewrite"]["messages"]]
    assert not any("[headroom:" in c for c in contents)
    inst = headroom.open({"keep_recent": 7})  # every message recent: nothing truncated
    contents = [m["content"] for m in inst.call(transform(agent_history()))["rewrite"]["messages"]]
    assert not any("stale output omitted" in c for c in contents)


@pytest.mark.parametrize(("settings", "message"), [
    ({"target_ratio": 0.5}, "not a Headroom setting"),
    ({"min_savings_pct": 101}, "settings.min_savings_pct"),
    ({"whitespace": "yes"}, "settings.whitespace"),
    ({"keep_recent": 0}, "settings.keep_recent"),
    ({"truncate_over_chars": 1000, "keep_head_chars": 800, "keep_tail_chars": 300}, "must be below"),
])
def test_bad_settings_fail_open_and_are_never_acked(headroom, settings, message) -> None:
    with pytest.raises(Exception, match=message):
        headroom.open(settings)
    inst = headroom.open({})
    with pytest.raises(Exception, match=message):
        inst.configure(settings, settings_version=3)
    assert inst.configure({"min_chars": 10}, settings_version=4) == {"ack": {"settings_version": 4}}
    status = inst.call({"status": True})["status"]
    assert status["settings_version"] == 4 and status["settings"] == {"min_chars": 10}


def test_status_stays_within_the_bounds_with_many_pools(headroom) -> None:
    inst = headroom.open({})
    for i in range(40):
        inst.call(transform(agent_history(), pool=f"pool-{i}"))
    metrics = inst.call({"status": True})["status"]["metrics"]
    assert len(metrics) <= 64
    pools = {m["labels"]["pool"] for m in metrics if m["name"] == "chars_saved_total"}
    assert "_other" in pools and len(pools) <= 10
    assert sum(m["value"] for m in metrics if m["name"] == "headroom_requests_total") == 40
    assert all(len(m.get("labels", {})) <= 8 for m in metrics)


def test_the_same_class_serves_as_a_sidecar(headroom) -> None:
    """Through busbar-webrequest-hook's wire: the sidecar's HTTP body is the in-process reply, byte for byte."""
    import httpx
    inst = headroom.open({})
    payload = transform(agent_history())
    server = sidecar.start(plugin_module("busbar_headroom_hook").plugin)
    try:
        body = httpx.post(server.url, content=json.dumps(payload)).content
    finally:
        server.close()
    assert body == json.dumps(inst.call(payload), separators=(",", ":")).encode()


# ------------------------------------------------------------------------------ never corrupting

def _compress_module():
    path = REPO / "plugins" / "busbar-headroom-hook" / "src" / "busbar_headroom_hook" / "_compress.py"
    spec = importlib.util.spec_from_file_location("busbar_headroom_compress_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


compress_mod = _compress_module()

_piece = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80),
    st.sampled_from(["\n", "\n\n\n", "   ", "\t", "```\n", "```py\n", "~~~\n", "\r\n", "  x  y  ", LOG[:300]]),
)
_text = st.lists(_piece, min_size=1, max_size=12).map("".join).filter(lambda t: t.strip() != "")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_text, min_size=1, max_size=6),
       st.builds(compress_mod.Knobs, dedup_min_chars=st.sampled_from([0, 1, 20, 200]),
                 truncate_over_chars=st.sampled_from([0, 50, 4000]), keep_head_chars=st.sampled_from([0, 10]),
                 keep_tail_chars=st.sampled_from([0, 10]), keep_recent=st.integers(1, 4)))
def test_compression_invariants(texts: list[str], knobs) -> None:
    result = compress_mod.compress(texts, knobs)
    assert len(result.texts) == len(texts)
    assert result.texts[-1] == texts[-1]
    for before, after in zip(texts, result.texts):
        assert after.strip(), "a message is never emptied"
        assert len(after) <= len(before)
    assert sum(result.saved.values()) == sum(map(len, texts)) - sum(map(len, result.texts))
    # deterministic
    assert compress_mod.compress(texts, knobs).texts == result.texts


def test_code_indentation_and_fence_contents_survive_whitespace_normalization() -> None:
    code = "```python\ndef f(x):\n    if x:  \n        return  x\n\n\n\n    return 0\n```"
    text = "Look:   at this\n\n\n\n" + code + "\n\n\n\nok   then"
    out = compress_mod.compress([text, "next"], compress_mod.Knobs()).texts[0]
    assert out == ("Look: at this\n\n```python\ndef f(x):\n    if x:\n        return  x\n\n\n\n    return 0\n```"
                   "\n\nok then")
