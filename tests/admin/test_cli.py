"""``busbar admin ...`` as a process against a real gateway's admin API: mint (token printed once),
list, patch, rotate, revoke, delete, audit list/verify (a row edited in the SQLite store file is
named), hooks status, the env-var configuration and the exit statuses (docs/admin.md#cli)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.admin.conftest import TOKEN, AdminGateway
from tests.support.waiting import wait_until

BUSBAR = str(Path(sys.executable).parent / "busbar")


def admin(gw: AdminGateway | None, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BUSBAR_ADMIN")}
    if gw is not None:
        base.update(BUSBAR_ADMIN_URL=gw.admin, BUSBAR_ADMIN_TOKEN=TOKEN)
    return subprocess.run([BUSBAR, "admin", *args], capture_output=True, text=True, timeout=60,
                          env={**base, **(env or {})})


def test_mint_prints_the_token_once_and_the_table(gw: AdminGateway) -> None:
    done = admin(gw, "keys", "mint", "--name", "cli-bob", "--allowed-pools", "fast", "--label", "team=growth",
                 "--expires-in", "30d", "--aws")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATE", "GROUP", "POOLS", "EXPIRES_AT"]
    row = lines[1].split()
    assert row[0].startswith("vk_") and row[1:5] == ["cli-bob", "active", "-", "fast"]
    assert lines[2].startswith("token: bbk_")
    assert lines[3].startswith("aws_access_key_id: BBAK")
    assert lines[4].startswith("aws_secret_access_key: ")
    assert done.stderr == "(the token is shown once: store it now)\n"
    key = gw.client.get(f"/keys/{row[0]}").json()
    assert (key["labels"], key["expires_at"] - key["created_at"]) == ({"team": "growth"}, 30 * 86400)
    listed = admin(gw, "keys", "list", "--prefix", "cli-bob")
    assert listed.returncode == 0
    assert [ln.split()[0] for ln in listed.stdout.splitlines()[1:]] == [row[0]]
    assert "bbk_" not in listed.stdout


def test_json_output_and_lifecycle(gw: AdminGateway) -> None:
    minted = json.loads(admin(gw, "--json", "keys", "mint", "--name", "cli-json").stdout)
    kid = minted["id"]
    assert minted["token"].startswith("bbk_")
    patched = json.loads(admin(gw, "--json", "keys", "patch", kid, "--disable").stdout)
    assert (patched["enabled"], patched["state"]) == (False, "disabled")
    rotated = json.loads(admin(gw, "--json", "keys", "rotate", kid).stdout)
    assert (rotated["generation"], rotated["token"] != minted["token"]) == (1, True)
    revoked = admin(gw, "keys", "revoke", kid, "--reason", "left the team")
    assert revoked.returncode == 0 and revoked.stdout.splitlines()[1].split()[2] == "revoked"
    deleted = admin(gw, "keys", "delete", kid)
    assert deleted.stdout.splitlines()[1].split()[2] == "tombstoned"
    actions = [r["action"] for r in json.loads(admin(gw, "--json", "audit", "list").stdout)["items"]
               if r["resource"] == f"key/{kid}"]
    assert actions == ["key.mint", "key.patch", "key.rotate", "key.revoke", "key.delete"]
    verify = admin(gw, "audit", "verify")
    assert verify.returncode == 0
    assert verify.stdout.startswith("audit log intact: ") and verify.stdout.endswith(" record(s)\n")


def test_api_refusals_and_bad_arguments(gw: AdminGateway) -> None:
    bad_group = admin(gw, "keys", "mint", "--name", "x", "--group", "nope")
    assert (bad_group.returncode, bad_group.stdout) == (1, "")
    assert bad_group.stderr == ("busbar admin: invalid_request: group 'nope' is not a configured group; add it under "
                                "groups:, or pass parent to auto-provision it\n")
    wrong = admin(gw, "keys", "list", env={"BUSBAR_ADMIN_TOKEN": "nope"})
    assert (wrong.returncode, wrong.stderr) == (1, "busbar admin: unauthorized: a valid admin credential is required "
                                                   "(Authorization: Bearer <token> or x-admin-token)\n")
    flag = admin(gw, "--token", "nope", "keys", "list")
    assert flag.returncode == 1 and "unauthorized" in flag.stderr
    missing = admin(gw, "keys", "get", "vk_nope")
    assert (missing.returncode, missing.stderr) == (1, "busbar admin: not_found: no key 'vk_nope'\n")
    usage = admin(gw, "keys", "mint")
    assert usage.returncode == 2 and "--name" in usage.stderr
    hooks = admin(gw, "hooks", "status")
    assert (hooks.returncode, hooks.stdout.split()) == (0, ["HOOK", "SUPPORTED", "VERSION", "DESIRED", "DRIFT",
                                                            "METRICS"])


def test_unreachable_url_is_exit_1() -> None:
    done = admin(None, "--url", "http://127.0.0.1:9", "keys", "list")
    assert done.returncode == 1
    assert done.stderr == ("busbar admin: cannot reach the admin API at http://127.0.0.1:9 (ConnectError); check "
                           "--url / BUSBAR_ADMIN_URL and that admin_listen is served\n")


def test_audit_verify_detects_a_row_edited_in_the_sqlite_store(admin_gateway: Callable[..., AdminGateway],
                                                              tmp_path: Path) -> None:
    db = tmp_path / "busbar.db"
    plugins = tmp_path / "plugins"          # only the SQLite store's tarball: a quicker boot
    plugins.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dist" / "plugins" / "busbar-store-sqlite-1.5.0.tar.gz", plugins)
    g = admin_gateway(f"plugins: {{ enabled: true, dir: {plugins} }}\n"
                      f"store: {{ module: sqlite, settings: {{ db_path: {db} }} }}\n")
    for name in ("a", "b", "c"):
        assert g.client.post("/keys", json={"name": name}).status_code == 201
    intact = admin(g, "audit", "verify")
    assert (intact.returncode, intact.stdout) == (0, f"audit log intact: {4 + _plugin_loads(g)} record(s)\n")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE busbar_audit SET principal = 'mallory' WHERE seq = 3")
    broken = admin(g, "audit", "verify")
    assert (broken.returncode, broken.stdout) == (1, "audit log BROKEN at seq 3: record 3 was altered (its hash "
                                                     "does not match its fields)\n")
    as_json = json.loads(admin(g, "--json", "audit", "verify").stdout)
    assert (as_json["ok"], as_json["first_bad_seq"]) == (False, 3)


def _plugin_loads(g: AdminGateway) -> int:
    return sum(1 for r in g.client.get("/audit").json()["items"] if r["action"] == "plugin.load")


GROUPS = """groups:
  eng:
    limits: [ { requests: 100, per: minute } ]
    child_default: { limits: [ { requests: 10, per: minute } ] }
"""


def test_mint_with_parent_provisions_a_group_the_groups_table_shows(
        admin_gateway: Callable[..., AdminGateway]) -> None:
    g = admin_gateway(GROUPS)
    minted = admin(g, "--json", "keys", "mint", "--name", "bob", "--group", "user:bob", "--parent", "eng")
    assert minted.returncode == 0, minted.stderr
    assert json.loads(minted.stdout)["group"] == "user:bob"
    moved = admin(g, "keys", "mint", "--name", "x", "--group", "user:bob", "--parent", "nope")
    assert (moved.returncode, moved.stderr) == (1, "busbar admin: conflict: group 'user:bob' exists with parent "
                                                   "'eng', not 'nope'; a mint never re-homes a group (omit parent "
                                                   "or name its actual parent)\n")
    table = admin(g, "groups")
    assert table.returncode == 0
    assert [line.split() for line in table.stdout.splitlines()] == [
        ["GROUP", "PARENT", "RUNTIME", "ENABLED", "LIMITS", "(used/amount)"],
        ["eng", "-", "no", "yes", "requests", "0/100", "per", "minute"],
        ["user:bob", "eng", "yes", "yes", "requests", "0/10", "per", "minute"]]
    usage = admin(g, "usage")
    assert usage.returncode == 0 and usage.stdout.splitlines()[1].split() == ["KEY", "REQUESTS", "INPUT", "OUTPUT",
                                                                              "SPEND_MICROS"]


def test_only_worker_zero_serves_the_admin_listener(admin_gateway: Callable[..., AdminGateway],
                                                   tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dist" / "plugins" / "busbar-store-sqlite-1.5.0.tar.gz", plugins)
    g = admin_gateway(f"plugins: {{ enabled: true, dir: {plugins} }}\n"
                      f"store: {{ module: sqlite, settings: {{ db_path: {tmp_path / 'w.db'} }} }}\n",
                      args=["--workers", "2"], env={"BUSBAR_LOG": "info"})
    wait_until(lambda: "busbar: 2 workers serving" in g.logs(), timeout=60, what="both workers up")
    assert admin(g, "keys", "mint", "--name", "w").returncode == 0
    boots = [r for r in g.client.get("/audit").json()["items"] if r["action"] == "boot"]
    assert len(boots) == 1
    assert g.logs().count("busbar admin API listening on") == 1
