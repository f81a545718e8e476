"""``busbar_bind_state`` through a real ``busbar`` on a SQLite store, with a third-party hook written
with plain pluggy markers and no sdk (``@hookimpl(optionalhook=True)``), signed by a test publisher:

- the instance receives its shared state once the store is open, and uses it from ``decide``: a
  windowed counter and an expiring value, read back on the next request;
- an instance whose ``busbar_bind_state`` raises is logged once and keeps serving without state;
- the memory store binds nothing (the state would be private to the process);
- settings changed with ``PATCH /hooks/{name}/settings`` move the instance to the namespace of the
  new settings (the one a node booted with them shares); a pool naming the plugin by its alias shares
  the namespace of one naming it by its name.

Source: docs/plugins.md#shared-state.
"""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import httpx
import pytest
from busbar.store.shared import namespace_of
from busbar_sdk.artifact import build_wheels, generate_signing_key

from tests.fleet.conftest import fleet_yaml
from tests.fleet.test_fleet import start_nodes
from tests.plugins.helpers import PLAIN_HOOK_HEAD, run_pack, write_project
from tests.support.gateway import free_port

KEY = generate_signing_key()
SOURCE = PLAIN_HOOK_HEAD + '''

@hookimpl
def busbar_open(settings):
    return {"settings": dict(settings), "state": None}


@hookimpl(optionalhook=True)
def busbar_bind_state(handle, state):
    if handle["settings"].get("fail"):
        raise RuntimeError("no state for me")
    handle["state"] = state


@hookimpl
def busbar_call(handle, payload):
    if "configure" in payload:
        handle["settings"] = payload["configure"]["settings"]
        return {"ack": {"settings_version": payload["configure"]["settings_version"]}}
    if payload.get("op") != "decide":
        return {}
    state = handle["state"]
    by_model = {c["model"]: c["idx"] for c in payload["candidates"]}
    if state is None:
        return {"order": [by_model["m-free"]]}
    last = state.get("last") or "none"
    state.put("last", payload["request"]["request_id"], 60)
    state.admit("seen", 60, 1000)
    if last == "none" or state.count("seen", 60) != 2:
        return {"order": [by_model["m-free"]]}
    return {"order": [by_model["m-bound"]]}
'''
POOLS = """\
  m-bound: { provider: oa }
  m-free: { provider: oa }
pools:
  stateful:
    members: [ { model: m-bound }, { model: m-free } ]
    hooks: [ { module: stateful-hook, timeout_ms: 2000, settings: { fail: false } } ]
  failing:
    members: [ { model: m-bound }, { model: m-free } ]
    hooks: [ { module: stateful-hook, timeout_ms: 2000, settings: { fail: true } } ]
  aliased:
    members: [ { model: m-bound }, { model: m-free } ]
    hooks: [ { module: stateful, timeout_ms: 2000, settings: { fail: false } } ]
"""


@pytest.fixture(scope="module")
def hook_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stateful-hook")
    project = write_project(root / "src", "stateful-hook", "1.0.0", "stateful_hook", SOURCE)
    wheel, = build_wheels([project], root / "wheels")
    out = root / "stateful-hook-1.0.0.tar.gz"
    assert run_pack(["pack", "--wheel", str(wheel), "--name", "stateful-hook", "--alias", "stateful",
                     "--kind", "hook", "--version", "1.0.0", "--publisher", "acme", "--out", str(out)], KEY[0]) == 0
    return out


@pytest.fixture
def plugdir(tmp_path: Path, plugins_dir: Path, hook_tarball: Path) -> Path:
    """The fleet's store tarballs plus the stateful hook's."""
    out = tmp_path / "plugins"
    shutil.copytree(plugins_dir, out)
    shutil.copy(hook_tarball, out)
    return out


def config(module: str, settings: dict, mock_url: str, plugins: Path) -> str:
    trust = f'{{ enabled: true, dir: {plugins}, trust: {{ publishers: [ {{ name: acme, public_key: "{KEY[1]}" }} ] }} }}'
    yaml = fleet_yaml(module, settings, mock_url, plugins).replace(f"{{ enabled: true, dir: {plugins} }}", trust)
    return yaml.replace("  gpt: { provider: oa }\n", POOLS)


def target(url: str, pool: str) -> str:
    r = httpx.post(url + "/v1/chat/completions", timeout=30,
                   json={"model": pool, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    return str(r.headers["x-busbar-route-target"])


@pytest.mark.slow
def test_a_plain_pluggy_hook_gets_its_state_and_a_failing_bind_is_logged(
        tmp_path: Path, mock, plugdir: Path, store_config) -> None:
    module, settings = store_config("sqlite")
    node, = start_nodes(1, config(module, settings, mock.url, plugdir), tmp_path)
    try:
        # 1st: nothing stored yet; 2nd: the value put by the 1st is read back and the window holds 2
        assert [target(node.url, "stateful") for _ in range(3)] == ["m-free", "m-bound", "m-free"]
        assert [target(node.url, "failing") for _ in range(2)] == ["m-free", "m-free"]   # no state: still serves
        logs = node.logs()
        assert logs.count("stateful-hook: busbar_bind_state raised; the instance keeps its state in this "
                          "process") == 1
        assert "RuntimeError: no state for me" in logs
    finally:
        node.stop()
    node, = start_nodes(1, config("memory", {}, mock.url, plugdir), tmp_path)
    try:
        assert [target(node.url, "stateful") for _ in range(2)] == ["m-free", "m-free"]
        assert "busbar_bind_state raised" not in node.logs()
    finally:
        node.stop()


ADMIN = """
admin_listen: "127.0.0.1:{admin_port}"
auth:
  admin_auth:
    - admin-tokens: { token: { env: T_ADMIN_TOKEN } }
"""


def buckets(db_path: str) -> list[str]:
    with sqlite3.connect(db_path) as db:
        return sorted(row[0] for row in db.execute("SELECT DISTINCT bucket FROM busbar_strict"))


@pytest.mark.slow
def test_patched_settings_move_the_instance_to_their_namespace(
        tmp_path: Path, mock, plugdir: Path, store_config) -> None:
    module, settings = store_config("sqlite")
    port = free_port()
    node, = start_nodes(1, config(module, settings, mock.url, plugdir) + ADMIN.replace("{admin_port}", str(port)),
                        tmp_path, env={"T_ADMIN_TOKEN": "adm-t0ken-5d1e"})
    try:
        target(node.url, "stateful")
        target(node.url, "aliased")                 # named by its alias: the same instance settings
        before = namespace_of("stateful-hook", {"fail": False}, "no", "no")
        assert buckets(settings["db_path"]) == [f"{before}:seen"]
        r = httpx.patch(f"http://127.0.0.1:{port}/api/v1/admin/hooks/stateful-hook/settings", timeout=30,
                        headers={"authorization": "Bearer adm-t0ken-5d1e"}, json={"settings": {"limit": 5}})
        assert (r.status_code, r.json()["settings"]) == (200, {"fail": False, "limit": 5})
        target(node.url, "stateful")
        after = namespace_of("stateful-hook", {"fail": False, "limit": 5}, "no", "no")
        assert buckets(settings["db_path"]) == sorted([f"{before}:seen", f"{after}:seen"])
    finally:
        node.stop()
