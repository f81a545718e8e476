"""The admin audit log: hash-chained records appended to the store, and their verification.

Every admin mutation (and the boot, each plugin loaded at boot, each refused use of a revoked key)
is one :class:`busbar_sdk.store.AuditRecord` ``{seq, ts, action, resource, outcome, principal,
prev_hash, hash}``. ``hash`` is the SHA-256 (hex) of the canonical JSON of the other seven fields,
so it covers ``prev_hash``: the records form a chain from ``prev_hash = "0" * 64`` at ``seq`` 1.
After each append the head (``<seq>:<hash>``) is written to the store meta ``audit.head``, so a
deleted last record is caught too.

One writer per fleet: appends on a node are serialized by a lock, and a record that lost a race with
another node (the store refuses a different record at a taken ``seq``: ``StoreConflict``) is
re-chained on the new tail and retried, so the chain stays linear whichever node writes.

:func:`verify` walks the whole log and names the first bad ``seq``: an edited record (its hash no
longer matches its fields, or its ``prev_hash`` no longer matches the record before), a deleted one
(a gap in ``seq``, or a head past the last record) and a reordered one (a record whose fields moved
to another ``seq``) all break it.

Source: docs/admin.md#audit-log.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from busbar_sdk.store import AuditRecord, Store, StoreConflict, StoreError

__all__ = ["GENESIS", "AuditLog", "Verdict", "chain_hash", "verify"]

log = logging.getLogger("busbar.admin")

GENESIS = "0" * 64
HEAD_META = "audit.head"
_RETRIES = 8
_PAGE = 1000


def chain_hash(seq: int, ts: int, action: str, resource: str, outcome: str, principal: str, prev_hash: str) -> str:
    """SHA-256 hex of the canonical JSON (sorted keys) of one record's fields minus ``hash``."""
    body = {"seq": seq, "ts": ts, "action": action, "resource": resource, "outcome": outcome,
            "principal": principal, "prev_hash": prev_hash}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _expected(r: AuditRecord) -> str:
    return chain_hash(r.seq, r.ts, r.action, r.resource, r.outcome, r.principal, r.prev_hash)


@dataclass(frozen=True)
class Verdict:
    """The result of :func:`verify`: ``ok``, how many records were checked, and for a broken
    chain the first bad ``seq`` and why."""

    ok: bool
    records: int
    first_bad_seq: int | None = None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """``{"ok", "records", "first_bad_seq", "reason"}``."""
        return {"ok": self.ok, "records": self.records, "first_bad_seq": self.first_bad_seq,
                "reason": self.reason}


async def verify(store: Store) -> Verdict:
    """Walk the whole log from ``seq`` 1; see the module docstring. Raises ``StoreError``."""
    expected_seq, prev, count = 1, GENESIS, 0
    after = 0
    while True:
        page = await store.list_audit(after_seq=after, limit=_PAGE)
        for r in page:
            count += 1
            if r.seq != expected_seq:
                return Verdict(False, count, expected_seq, f"record {expected_seq} is missing (the next one "
                                                           f"is {r.seq})")
            if r.prev_hash != prev:
                return Verdict(False, count, r.seq, f"record {r.seq} does not follow record {r.seq - 1} "
                                                    f"(prev_hash differs: a record was edited, removed or "
                                                    f"moved)")
            if r.hash != _expected(r):
                return Verdict(False, count, r.seq, f"record {r.seq} was altered (its hash does not match "
                                                    f"its fields)")
            prev, expected_seq = r.hash, r.seq + 1
        if len(page) < _PAGE:
            break
        after = page[-1].seq
    head = await store.get_meta(HEAD_META)
    if head:
        seq_s, _, head_hash = head.partition(":")
        head_seq = int(seq_s) if seq_s.isdigit() else 0
        if head_seq >= expected_seq:
            return Verdict(False, count, expected_seq, f"record {expected_seq} is missing (the log's head is "
                                                       f"record {head_seq})")
        if head_seq == expected_seq - 1 and head_seq > 0 and head_hash != prev:
            return Verdict(False, count, head_seq, f"record {head_seq} was altered (it is not the head "
                                                   f"that was written)")
    return Verdict(True, count)


class AuditLog:
    """Appends records to ``store`` (see the module docstring).

    Args:
        store: an opened store.
        clock: Unix seconds (injectable for tests).
    """

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._clock = clock
        self._lock = asyncio.Lock()
        self._tail: tuple[int, str] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    async def _load_tail(self) -> tuple[int, str]:
        tail = await self.store.audit_tail(1)
        return (tail[-1].seq, tail[-1].hash) if tail else (0, GENESIS)

    async def append(self, action: str, resource: str, outcome: str, principal: str) -> AuditRecord:
        """Append one record and return it.

        Raises:
            StoreError: the store refused or is unreachable (after re-chaining on lost races).
        """
        async with self._lock:
            for _ in range(_RETRIES):
                if self._tail is None:
                    self._tail = await self._load_tail()
                seq, prev = self._tail[0] + 1, self._tail[1]
                ts = int(self._clock())
                rec = AuditRecord(seq, ts, action, resource, outcome, principal, prev,
                                  chain_hash(seq, ts, action, resource, outcome, principal, prev))
                try:
                    await self.store.append_audit(rec)
                except StoreConflict:
                    self._tail = None          # another node wrote this seq: re-read the tail
                    continue
                self._tail = (seq, rec.hash)
                await self.store.put_meta(HEAD_META, f"{seq}:{rec.hash}")
                return rec
            raise StoreConflict(f"audit: lost {_RETRIES} races for the next seq in a row")

    def note(self, action: str, resource: str, outcome: str, principal: str) -> None:
        """Append in the background (for callers that cannot await, e.g. the request path); a
        failure is logged, never raised. Needs a running event loop."""
        async def run() -> None:
            try:
                await self.append(action, resource, outcome, principal)
            except StoreError as e:
                log.warning("audit: could not record %s %s (%s): %s", action, resource, outcome, e)
        task = asyncio.get_running_loop().create_task(run())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        """Wait for every :meth:`note` still in flight."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
