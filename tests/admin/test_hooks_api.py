"""The hook routes against a real busbar running the signed first-party headroom hook as a global
gate: list, inspect, describe (schema), status, and PATCH settings pushed with ``configure``, which
takes only on the hook's exact ack (docs/admin.md#hooks)."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.admin.conftest import AdminGateway
from tests.admin.test_cli import admin

ROOT = Path(__file__).resolve().parents[2]
HOOK = "busbar-headroom"


@pytest.fixture(scope="module")
def hooks_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminGateway]:
    tmp = tmp_path_factory.mktemp("hooks")
    plugins = tmp / "plugins"
    plugins.mkdir()
    shutil.copy(ROOT / "dist" / "plugins" / "busbar-headroom-hook-1.5.0.tar.gz", plugins)
    g = AdminGateway(tmp, f"plugins: {{ enabled: true, dir: {plugins} }}\n"
                          f"global_hooks:\n  - {{ module: {HOOK}, kind: gate, prompt: rw, timeout_ms: 25, "
                          f"on_error: nothing }}\n")
    g.start()
    yield g
    g.stop()


def test_list_inspect_schema_status_then_patch_settings(hooks_gw: AdminGateway) -> None:
    items = hooks_gw.client.get("/hooks").json()["items"]
    assert [(h["name"], h["prompt"], h["settings_version"]) for h in items] == [(HOOK, "rw", 1)]
    one = hooks_gw.client.get(f"/hooks/{HOOK}").json()
    assert (one["name"], one["settings"], set(one["counters"])) == (
        HOOK, {}, {"calls", "timeouts", "errors", "garbage", "saturated"})
    schema = hooks_gw.client.get(f"/hooks/{HOOK}/schema").json()
    assert schema["supported"] is True and "min_savings_chars" in schema["schema"]["properties"]
    status = hooks_gw.client.get(f"/hooks/{HOOK}/status").json()
    assert (status["supported"], status["desired_version"]) == (True, 1)
    assert isinstance(status["metrics"], list)
    missing = hooks_gw.client.get("/hooks/nope/status")
    assert (missing.status_code, missing.json()) == (404, {"error": {"code": "not_found",
                                                                     "message": "no running hook 'nope'"}})

    ok = hooks_gw.client.patch(f"/hooks/{HOOK}/settings", json={"settings": {"min_savings_chars": 77}})
    assert ok.status_code == 200
    assert ok.json() == {"name": HOOK, "settings_version": 2, "acked": True, "settings": {"min_savings_chars": 77}}
    status = hooks_gw.client.get(f"/hooks/{HOOK}/status").json()
    assert (status["settings_version"], status["drift"]) == (2, "in_sync")
    typed = hooks_gw.client.patch(f"/hooks/{HOOK}/settings", json={"settings": {"min_savings_chars": "many",
                                                                                "min_chars": -1, "level": 3}})
    assert (typed.status_code, typed.json()) == (400, {"error": {"code": "invalid_request", "message": (
        f"hook '{HOOK}': settings.level: unknown setting for {HOOK} (it takes dedup_min_chars, keep_head_chars, "
        "keep_recent, keep_tail_chars, max_input_chars, min_chars, min_savings_chars, min_savings_pct, "
        "truncate_over_chars, whitespace); settings.min_chars: must be >= 0; settings.min_savings_chars: expected "
        "an integer, got str")}})                         # the schema's faults: never pushed to the hook
    bad = hooks_gw.client.patch(f"/hooks/{HOOK}/settings",     # schema-valid; the hook's own rule refuses it
                                json={"settings": {"keep_head_chars": 3000, "keep_tail_chars": 1000}})
    assert bad.status_code == 409
    assert bad.json() == {"error": {"code": "conflict", "message": f"hook '{HOOK}' did not acknowledge "
                                                                   f"settings_version 3; its settings are unchanged "
                                                                   f"(see the server log)"}}
    assert hooks_gw.client.get(f"/hooks/{HOOK}").json()["settings"] == {"min_savings_chars": 77}
    audit = [(a["resource"], a["outcome"])
             for a in hooks_gw.client.get("/audit", params={"action": "hook.configure"}).json()["items"]]
    assert audit == [(f"hook/{HOOK}", "ok"), (f"hook/{HOOK}", "not_acknowledged")]
    unknown = hooks_gw.client.patch(f"/hooks/{HOOK}/settings", json={"min_savings_chars": 1})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (400, "invalid_request")


def test_cli_hooks_status(hooks_gw: AdminGateway) -> None:
    done = admin(hooks_gw, "hooks", "status")
    assert done.returncode == 0
    lines = [ln.split() for ln in done.stdout.splitlines()]
    assert lines[0] == ["HOOK", "SUPPORTED", "VERSION", "DESIRED", "DRIFT", "METRICS"]
    name, supported, version, desired, drift = lines[1][:5]
    assert (name, supported, drift, version == desired) == (HOOK, "True", "in_sync", True)


def test_a_patch_whose_cel_does_not_compile_answers_400_and_changes_nothing(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The rules hook's ``when`` is an ``x-busbar-cel`` setting: the kernel compiles it before the
    push, so a bad expression is the caller's 400 (the key path and CEL's own message), not a
    configure the hook refuses (409)."""
    tmp = tmp_path_factory.mktemp("rules")
    plugins = tmp / "plugins"
    plugins.mkdir()
    shutil.copy(ROOT / "dist" / "plugins" / "busbar-rules-hook-1.5.0.tar.gz", plugins)
    rules = "busbar-rules"
    g = AdminGateway(tmp, f"plugins: {{ enabled: true, dir: {plugins} }}\n"
                          f"global_hooks:\n  - {{ module: {rules}, timeout_ms: 25, on_error: nothing, "
                          f"settings: {{ rules: [ {{ when: 'req.stream', to: [gpt] }} ] }} }}\n")
    g.start()
    try:
        bad = g.client.patch(f"/hooks/{rules}/settings",
                             json={"settings": {"rules": [{"when": "req.stream", "to": ["gpt"]},
                                                          {"when": "req.total_chars >", "to": ["gpt"]}]}})
        assert (bad.status_code, bad.json()) == (400, {"error": {"code": "invalid_request", "message": (
            f"hook '{rules}': settings.rules[1].when: CEL: INVALID_ARGUMENT: ERROR: <input>:1:18: Syntax error: "
            "mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, "
            "NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} | req.total_chars > | .................^ "
            "[INVALID_ARGUMENT]")}})
        one = g.client.get(f"/hooks/{rules}").json()
        assert (one["settings_version"], one["settings"]) == (1, {"rules": [{"when": "req.stream", "to": ["gpt"]}]})
        ok = g.client.patch(f"/hooks/{rules}/settings",
                            json={"settings": {"rules": [{"when": "req.total_chars > 9", "to": ["gpt"]}]}})
        assert (ok.status_code, ok.json()["settings_version"]) == (200, 2)
    finally:
        g.stop()
