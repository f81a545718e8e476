"""The store operation vocabulary on the plugin wire, and both ends of it.

A store plugin is called with ``{"op": <name>, "args": {...}}`` through its async twin
(``busbar_call.busbar_acall``) and answers ``{"result": <JSON>}`` or
``{"error": {"kind": <StoreError.kind>, "message": str}}``. :data:`OPS` is the one table of
operations, argument codecs and result codecs; :func:`dispatch` serves it on the plugin side and
:class:`RemoteStore` speaks it on the kernel side, so the two cannot drift.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from busbar_sdk.store.contract import Store
from busbar_sdk.store.errors import StoreError, StoreInvalid, StoreUnsupported, error_for_kind
from busbar_sdk.store.records import (
    AuditRecord,
    CredentialMeta,
    CredentialSecret,
    DenyEntry,
    MeteringDelta,
    MeteringRow,
    UsageItem,
    UsageLedger,
    VirtualKey,
)
from busbar_sdk.store.strict import StrictCharge, StrictCounter, StrictRelease

__all__ = ["OPS", "Codec", "RemoteStore", "dispatch"]


@dataclass(frozen=True, slots=True)
class Codec:
    """``encode(python) -> JSON`` and ``decode(JSON) -> python`` (raises StoreInvalid)."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


def _scalar(*types: type) -> Codec:
    def decode(v: Any) -> Any:
        if (isinstance(v, bool) and bool not in types) or not isinstance(v, types):
            raise StoreInvalid(f"expected {' or '.join(t.__name__ for t in types)}, got {type(v).__name__}")
        return v
    return Codec(lambda v: v, decode)


def _record(cls: Any) -> Codec:
    return Codec(lambda v: v.to_wire(), cls.from_wire)


def _list(inner: Codec) -> Codec:
    def decode(v: Any) -> list[Any]:
        if not isinstance(v, list):
            raise StoreInvalid(f"expected a list, got {type(v).__name__}")
        return [inner.decode(x) for x in v]
    return Codec(lambda v: [inner.encode(x) for x in v], decode)


def _optional(inner: Codec) -> Codec:
    return Codec(lambda v: None if v is None else inner.encode(v), lambda v: None if v is None else inner.decode(v))


def _windows_decode(v: Any) -> dict[int, UsageLedger]:
    if not isinstance(v, dict):
        raise StoreInvalid("expected an object of windows")
    try:
        return {int(k): UsageLedger.from_wire(x) for k, x in v.items()}
    except ValueError:
        raise StoreInvalid("window keys must be integers") from None


STR, INT, BOOL = _scalar(str), _scalar(int), _scalar(bool)
NONE = Codec(lambda v: None, lambda v: None)
DICT = _scalar(dict)
KEY, LEDGER, AUDIT = _record(VirtualKey), _record(UsageLedger), _record(AuditRecord)
DENY, META, SECRET = _record(DenyEntry), _record(CredentialMeta), _record(CredentialSecret)
WINDOWS = Codec(lambda v: {str(k): x.to_wire() for k, x in v.items()}, _windows_decode)

#: op -> ((argument name, codec, default or ``_REQUIRED``), ...), result codec.
_REQUIRED = object()
OPS: dict[str, tuple[tuple[tuple[str, Codec, Any], ...], Codec]] = {
    "open": ((), NONE),
    "close": ((), NONE),
    "info": ((), DICT),
    "put_key": ((("key", KEY, _REQUIRED),), KEY),
    "get_key": ((("key_id", STR, _REQUIRED),), _optional(KEY)),
    "list_keys": ((("since", INT, 0),), _list(KEY)),
    "delete_key": ((("key_id", STR, _REQUIRED), ("now", INT, _REQUIRED)), KEY),
    "scrub_key": ((("key_id", STR, _REQUIRED),), KEY),
    "get_usage": ((("bucket", STR, _REQUIRED), ("window_start", INT, _REQUIRED)), LEDGER),
    "put_usage": ((("bucket", STR, _REQUIRED), ("window_start", INT, _REQUIRED), ("ledger", LEDGER, _REQUIRED)),
                  NONE),
    "add_usage": ((("items", _list(_record(UsageItem)), _REQUIRED),), NONE),
    "list_usage": ((("bucket", STR, _REQUIRED),), WINDOWS),
    "strict_admit": ((("charges", _list(_record(StrictCharge)), _REQUIRED),), _optional(INT)),
    "strict_settle": ((("releases", _list(_record(StrictRelease)), _REQUIRED),), NONE),
    "strict_get": ((("bucket", STR, _REQUIRED), ("window_start", INT, _REQUIRED), ("metric", STR, _REQUIRED)),
                   _record(StrictCounter)),
    "kv_get": ((("name", STR, _REQUIRED), ("now", INT, _REQUIRED)), _optional(STR)),
    "kv_put": ((("name", STR, _REQUIRED), ("value", STR, _REQUIRED), ("expires_at", INT, _REQUIRED)), NONE),
    "add_metering": ((("deltas", _list(_record(MeteringDelta)), _REQUIRED),), NONE),
    "list_metering": ((("day", STR, _REQUIRED),), _list(_record(MeteringRow))),
    "purge_metering_before": ((("day", STR, _REQUIRED),), INT),
    "append_audit": ((("record", AUDIT, _REQUIRED),), NONE),
    "list_audit": ((("after_seq", INT, 0), ("limit", INT, 1000)), _list(AUDIT)),
    "audit_tail": ((("limit", INT, _REQUIRED),), _list(AUDIT)),
    "add_denylist": ((("sub", STR, _REQUIRED), ("reason", STR, _REQUIRED), ("now", INT, _REQUIRED)), DENY),
    "list_denylist": ((("since", INT, 0),), _list(DENY)),
    "put_credential": ((("credential", SECRET, _REQUIRED),), META),
    "list_credentials": ((("key_id", STR, _REQUIRED),), _list(META)),
    "lookup_credential": ((("kind", STR, _REQUIRED), ("public_id", STR, _REQUIRED)), _optional(SECRET)),
    "revoke_credential": ((("credential_id", STR, _REQUIRED), ("reason", STR, _REQUIRED), ("now", INT, _REQUIRED)),
                          META),
    "list_credentials_since": ((("since", INT, 0),), _list(SECRET)),
    "get_meta": ((("name", STR, _REQUIRED),), _optional(STR)),
    "put_meta": ((("name", STR, _REQUIRED), ("value", STR, _REQUIRED), ("only_if_absent", BOOL, False)), STR),
}


def _error(exc: StoreError) -> dict[str, Any]:
    return {"error": {"kind": exc.kind, "message": str(exc)}}


async def dispatch(store: Store, payload: Any) -> dict[str, Any]:
    """Serve one wire call on ``store`` (plugin side). Never raises: every failure is an
    ``{"error": ...}`` reply; a non-store exception becomes kind ``error`` with its text."""
    if not isinstance(payload, dict) or not isinstance(payload.get("op"), str):
        return _error(StoreInvalid("a store call is {\"op\": str, \"args\": {...}}"))
    op = payload["op"]
    spec = OPS.get(op)
    if spec is None:
        return _error(StoreUnsupported(f"unknown store operation {op!r}"))
    params, result = spec
    args = payload.get("args") or {}
    if not isinstance(args, dict):
        return _error(StoreInvalid(f"{op}: args must be an object"))
    unknown = set(args) - {name for name, _, _ in params}
    if unknown:
        return _error(StoreInvalid(f"{op}: unknown argument(s) {', '.join(sorted(unknown))}"))
    kwargs: dict[str, Any] = {}
    try:
        for name, codec, default in params:
            if name in args:
                kwargs[name] = codec.decode(args[name])
            elif default is _REQUIRED:
                raise StoreInvalid(f"missing argument {name!r}")
        value = await getattr(store, op)(**kwargs)
        return {"result": result.encode(value)}
    except StoreError as exc:
        if isinstance(exc, StoreInvalid) and not str(exc).startswith(op):
            exc = StoreInvalid(f"{op}: {exc}")
        return _error(exc)
    except Exception as exc:  # noqa: BLE001 - backend code: reported, never raised through the ABI
        return {"error": {"kind": "error", "message": f"{op}: {type(exc).__name__}: {exc}"}}


Call = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class RemoteStore(Store):
    """A :class:`Store` whose every method is one wire call through ``call`` (kernel side).

    Args:
        call: ``await call({"op", "args"}) -> {"result"} | {"error"}`` (a plugin instance's acall).
        backend: the name ``info()`` and messages use.

    Raises (every method): the :class:`StoreError` subclass named by the reply's ``kind``;
    :class:`StoreInvalid` for a reply that is neither shape.
    """

    def __init__(self, call: Call, backend: str) -> None:
        self._call = call
        self.backend = backend

    async def _op(self, op: str, **kwargs: Any) -> Any:
        params, result = OPS[op]
        codecs = {name: codec for name, codec, _ in params}
        reply = await self._call({"op": op, "args": {k: codecs[k].encode(v) for k, v in kwargs.items()}})
        if isinstance(reply, dict) and "result" in reply:
            return result.decode(reply["result"])
        err = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(err, dict):
            raise error_for_kind(str(err.get("kind", "error")), str(err.get("message", "")))
        raise StoreInvalid(f"{self.backend}: {op} answered neither a result nor an error")

    async def open(self) -> None:
        await self._op("open")

    async def close(self) -> None:
        await self._op("close")

    async def info(self) -> dict[str, Any]:
        info: dict[str, Any] = await self._op("info")
        return info

    async def put_key(self, key: VirtualKey) -> VirtualKey:
        row: VirtualKey = await self._op("put_key", key=key)
        return row

    async def get_key(self, key_id: str) -> VirtualKey | None:
        row: VirtualKey | None = await self._op("get_key", key_id=key_id)
        return row

    async def list_keys(self, since: int = 0) -> list[VirtualKey]:
        rows: list[VirtualKey] = await self._op("list_keys", since=since)
        return rows

    async def delete_key(self, key_id: str, now: int) -> VirtualKey:
        row: VirtualKey = await self._op("delete_key", key_id=key_id, now=now)
        return row

    async def scrub_key(self, key_id: str) -> VirtualKey:
        row: VirtualKey = await self._op("scrub_key", key_id=key_id)
        return row

    async def get_usage(self, bucket: str, window_start: int) -> UsageLedger:
        ledger: UsageLedger = await self._op("get_usage", bucket=bucket, window_start=window_start)
        return ledger

    async def put_usage(self, bucket: str, window_start: int, ledger: UsageLedger) -> None:
        await self._op("put_usage", bucket=bucket, window_start=window_start, ledger=ledger)

    async def add_usage(self, items: list[UsageItem]) -> None:
        await self._op("add_usage", items=items)

    async def list_usage(self, bucket: str) -> dict[int, UsageLedger]:
        windows: dict[int, UsageLedger] = await self._op("list_usage", bucket=bucket)
        return windows

    async def strict_admit(self, charges: list[StrictCharge]) -> int | None:
        over: int | None = await self._op("strict_admit", charges=charges)
        return over

    async def strict_settle(self, releases: list[StrictRelease]) -> None:
        await self._op("strict_settle", releases=releases)

    async def strict_get(self, bucket: str, window_start: int, metric: str) -> StrictCounter:
        counter: StrictCounter = await self._op("strict_get", bucket=bucket, window_start=window_start, metric=metric)
        return counter

    async def kv_get(self, name: str, now: int) -> str | None:
        value: str | None = await self._op("kv_get", name=name, now=now)
        return value

    async def kv_put(self, name: str, value: str, expires_at: int) -> None:
        await self._op("kv_put", name=name, value=value, expires_at=expires_at)

    async def add_metering(self, deltas: list[MeteringDelta]) -> None:
        await self._op("add_metering", deltas=deltas)

    async def list_metering(self, day: str) -> list[MeteringRow]:
        rows: list[MeteringRow] = await self._op("list_metering", day=day)
        return rows

    async def purge_metering_before(self, day: str) -> int:
        n: int = await self._op("purge_metering_before", day=day)
        return n

    async def append_audit(self, record: AuditRecord) -> None:
        await self._op("append_audit", record=record)

    async def list_audit(self, after_seq: int = 0, limit: int = 1000) -> list[AuditRecord]:
        rows: list[AuditRecord] = await self._op("list_audit", after_seq=after_seq, limit=limit)
        return rows

    async def audit_tail(self, limit: int) -> list[AuditRecord]:
        rows: list[AuditRecord] = await self._op("audit_tail", limit=limit)
        return rows

    async def add_denylist(self, sub: str, reason: str, now: int) -> DenyEntry:
        entry: DenyEntry = await self._op("add_denylist", sub=sub, reason=reason, now=now)
        return entry

    async def list_denylist(self, since: int = 0) -> list[DenyEntry]:
        rows: list[DenyEntry] = await self._op("list_denylist", since=since)
        return rows

    async def put_credential(self, credential: CredentialSecret) -> CredentialMeta:
        meta: CredentialMeta = await self._op("put_credential", credential=credential)
        return meta

    async def list_credentials(self, key_id: str) -> list[CredentialMeta]:
        rows: list[CredentialMeta] = await self._op("list_credentials", key_id=key_id)
        return rows

    async def lookup_credential(self, kind: str, public_id: str) -> CredentialSecret | None:
        row: CredentialSecret | None = await self._op("lookup_credential", kind=kind, public_id=public_id)
        return row

    async def revoke_credential(self, credential_id: str, reason: str, now: int) -> CredentialMeta:
        meta: CredentialMeta = await self._op("revoke_credential", credential_id=credential_id, reason=reason,
                                              now=now)
        return meta

    async def list_credentials_since(self, since: int = 0) -> list[CredentialSecret]:
        rows: list[CredentialSecret] = await self._op("list_credentials_since", since=since)
        return rows

    async def get_meta(self, name: str) -> str | None:
        value: str | None = await self._op("get_meta", name=name)
        return value

    async def put_meta(self, name: str, value: str, *, only_if_absent: bool = False) -> str:
        stored: str = await self._op("put_meta", name=name, value=value, only_if_absent=only_if_absent)
        return stored
