"""busbar-rules-hook in-process: its ``decide`` replies and the ``rules_decisions_total`` counters its
``status`` reports (one lock-free counter per rule label, also when several threads decide at once).

The plugin is imported from its source tree for this module only (and forgotten after), so tests that
load the signed tarball in-process are not refused for a package the environment could import.
Source: docs/router.md#busbar-rules-hook.
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "plugins" / "busbar-rules-hook" / "src")

CANDS = [{"idx": 0, "model": "a", "provider": "oa", "weight": 1, "tags": ("code",), "available_concurrency": 9},
         {"idx": 1, "model": "b", "provider": "oa", "weight": 1, "available_concurrency": 9},
         {"idx": 2, "model": "c", "provider": "oa", "weight": 1, "tags": ("code",), "available_concurrency": 9}]
SETTINGS = {"rules": [{"when": "req.has_tools", "to": ["b"]},
                      {"when": 'req.prompt.contains("python")', "to": ["code"]},
                      {"when": "req.total_chars > 100", "to": ["c", "b", "c"]}],
            "default": ["b"]}


@pytest.fixture(scope="module")
def hook_class() -> Iterator[Any]:
    sys.path.insert(0, SRC)
    try:
        from busbar_rules_hook import RulesHook

        yield RulesHook
    finally:
        sys.path.remove(SRC)
        for name in [m for m in sys.modules if m == "busbar_rules_hook" or m.startswith("busbar_rules_hook.")]:
            del sys.modules[name]


def payload(text: str, *, tools: bool = False) -> dict[str, Any]:
    return {"op": "decide", "candidates": CANDS,
            "request": {"request_id": "r", "pool": "p", "ingress_protocol": "openai", "message_count": 1,
                        "has_tools": tools, "total_chars": len(text), "stream": False,
                        "messages": [{"role": "user", "text": text}]}}


def counts(hook: Any) -> dict[str, int]:
    metrics = hook.status()["status"]["metrics"]
    assert all(m["name"] == "rules_decisions_total" and m["type"] == "counter" for m in metrics)
    return {m["labels"]["rule"]: m["value"] for m in metrics}


def test_replies_and_the_counters_by_rule(hook_class) -> None:
    hook = hook_class(SETTINGS)
    assert counts(hook) == {}
    assert hook.decide(payload("hi", tools=True)) == {"order": [1]}
    assert hook.decide(payload("write python")) == {"order": [0, 2]}          # a tag: its members, pool order
    assert hook.decide(payload("x" * 200)) == {"order": [2, 1]}               # several names: no duplicate
    assert hook.decide(payload("hello")) == {"order": [1]}                    # the default
    assert hook.decide(payload("python again")) == {"order": [0, 2]}
    assert counts(hook) == {"0": 1, "1": 2, "2": 1, "default": 1}
    assert counts(hook) == {"0": 1, "1": 2, "2": 1, "default": 1}             # reading does not advance them


def test_nothing_holds_without_a_default(hook_class) -> None:
    hook = hook_class({"rules": SETTINGS["rules"]})
    assert hook.decide(payload("hello")) == {}
    assert counts(hook) == {"none": 1}


def test_counters_are_exact_under_threads(hook_class) -> None:
    """A hook demoted to its worker threads decides on several at once: no decision is lost."""
    hook = hook_class(SETTINGS)
    go = threading.Barrier(4)

    def work() -> None:
        go.wait()
        for _ in range(500):
            hook.decide(payload("write python"))
            hook.decide(payload("hello"))
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts(hook) == {"1": 2000, "default": 2000}
