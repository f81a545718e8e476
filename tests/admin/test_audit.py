"""The hash-chained audit log on a real SQLite store file: appends chain, and verify names the first
bad seq when a row is edited, deleted or reordered directly in the database (docs/admin.md#audit-log)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from busbar.admin.audit import GENESIS, AuditLog, chain_hash, verify
from busbar_sdk.store import AuditRecord, MemoryStore
from busbar_sdk.store.sql import SqlStore
from sqlalchemy.ext.asyncio import create_async_engine


async def _log(path: Path, n: int = 5) -> SqlStore:
    store = SqlStore(create_async_engine(f"sqlite+aiosqlite:///{path}"), backend="sqlite", where=str(path))
    await store.open()
    log = AuditLog(store, clock=lambda: 1_800_000_000.0)
    for i in range(1, n + 1):
        await log.append("key.mint", f"key/vk_{i}", "ok", "admin-tokens")
    return store


def _sql(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute(statement)


async def test_records_chain_from_genesis(tmp_path: Path) -> None:
    store = await _log(tmp_path / "a.db", 3)
    rows = await store.list_audit()
    assert [r.seq for r in rows] == [1, 2, 3]
    assert rows[0].prev_hash == GENESIS
    assert [r.prev_hash for r in rows[1:]] == [r.hash for r in rows[:-1]]
    assert rows[1].hash == chain_hash(2, 1_800_000_000, "key.mint", "key/vk_2", "ok", "admin-tokens", rows[0].hash)
    assert (await verify(store)).to_json() == {"ok": True, "records": 3, "first_bad_seq": None, "reason": ""}
    await store.close()


@pytest.mark.parametrize(("tamper", "bad", "reason"), [
    ("UPDATE busbar_audit SET principal = 'mallory' WHERE seq = 3", 3,
     "record 3 was altered (its hash does not match its fields)"),
    ("DELETE FROM busbar_audit WHERE seq = 2", 2, "record 2 is missing (the next one is 3)"),
    ("DELETE FROM busbar_audit WHERE seq = 5", 5, "record 5 is missing (the log's head is record 5)"),
    ("UPDATE busbar_audit SET resource = CASE seq WHEN 2 THEN 'key/vk_3' ELSE 'key/vk_2' END, "
     "hash = CASE seq WHEN 2 THEN (SELECT hash FROM busbar_audit WHERE seq = 3) "
     "ELSE (SELECT hash FROM busbar_audit WHERE seq = 2) END, "
     "prev_hash = CASE seq WHEN 2 THEN (SELECT prev_hash FROM busbar_audit WHERE seq = 3) "
     "ELSE (SELECT prev_hash FROM busbar_audit WHERE seq = 2) END WHERE seq IN (2, 3)", 2,
     "record 2 does not follow record 1 (prev_hash differs: a record was edited, removed or moved)"),
], ids=["edited", "deleted", "tail-deleted", "reordered"])
async def test_verify_names_the_first_bad_seq(tmp_path: Path, tamper: str, bad: int, reason: str) -> None:
    path = tmp_path / "audit.db"
    store = await _log(path)
    await store.close()
    _sql(path, tamper)
    store = SqlStore(create_async_engine(f"sqlite+aiosqlite:///{path}"), backend="sqlite", where=str(path))
    await store.open()
    verdict = await verify(store)
    assert (verdict.ok, verdict.first_bad_seq, verdict.reason) == (False, bad, reason)
    await store.close()


async def test_a_lost_race_is_rechained_on_the_other_writers_record() -> None:
    store = MemoryStore()
    a, b = AuditLog(store), AuditLog(store)
    await a.append("boot", "busbar", "ok", "system")
    await b.append("boot", "busbar", "ok", "system")        # b re-reads the tail: seq 2
    await a.append("key.mint", "key/vk_1", "ok", "admin-tokens")   # a's cached tail is stale: conflict, retry
    rows = await store.list_audit()
    assert [r.seq for r in rows] == [1, 2, 3]
    assert (await verify(store)).ok


async def test_a_different_record_at_a_taken_seq_is_refused() -> None:
    store = MemoryStore()
    log = AuditLog(store)
    first = await log.append("boot", "busbar", "ok", "system")
    forged = AuditRecord(1, first.ts, "boot", "busbar", "ok", "mallory", GENESIS, "0" * 64)
    from busbar_sdk.store import StoreConflict
    with pytest.raises(StoreConflict):
        await store.append_audit(forged)
