"""The records that cross the store seam, with their JSON wire forms.

Every record is a plain dataclass; ``to_wire()`` gives a JSON-compatible dict and
``Record.from_wire(obj)`` parses one back, raising :class:`~busbar_sdk.store.errors.StoreInvalid`
on a wrong shape. Times are integer Unix seconds; token and request counts are integers (never
money: spend is derived from the ledger and the rate card when it is read).

- :class:`VirtualKey`: a key's binding (identity, pool grant, group, labels, lifecycle). The signed
  token itself is never stored.
- :class:`TierTokens`: one model's tokens by pricing tier; :class:`UsageLedger` /
  :class:`UsageDelta`: a bucket window's requests and per-model tiers, absolute / signed.
- :class:`UsageItem`: one ``(bucket, window_start, delta)`` of an additive flush.
- :class:`MeteringDelta` / :class:`MeteringRow`: per key x day x model x provider consumption.
- :class:`AuditRecord`: one hash-chained admin audit record (the chain is computed by the caller).
- :class:`DenyEntry`: one revoked subject.
- :class:`CredentialMeta` / :class:`CredentialSecret`: a row-looked-up credential (``kind``
  ``sigv4`` today) without / with its secret.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Self

from busbar_sdk.store.errors import StoreInvalid

__all__ = [
    "AuditRecord",
    "CredentialMeta",
    "CredentialSecret",
    "DenyEntry",
    "MeteringDelta",
    "MeteringRow",
    "TierTokens",
    "UsageDelta",
    "UsageItem",
    "UsageLedger",
    "VirtualKey",
]

_TIERS = ("input", "output", "cache_read", "cache_write")


def _need(obj: Any, name: str, types: type | tuple[type, ...], where: str, *, optional: bool = False) -> Any:
    if not isinstance(obj, dict):
        raise StoreInvalid(f"{where}: expected an object, got {type(obj).__name__}")
    if name not in obj:
        if optional:
            return None
        raise StoreInvalid(f"{where}.{name}: missing")
    value = obj[name]
    if value is None and optional:
        return None
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise StoreInvalid(f"{where}.{name}: expected {_names(types)}, got bool")
    if not isinstance(value, types):
        raise StoreInvalid(f"{where}.{name}: expected {_names(types)}, got {type(value).__name__}")
    return value


def _names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))


class _Flat:
    """Wire form = the dataclass fields, as they are (scalars, lists, dicts of scalars)."""

    WHERE: ClassVar[str] = "record"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {}

    def to_wire(self) -> dict[str, Any]:
        return {f.name: _copy(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_wire(cls, obj: Any) -> Self:
        if not isinstance(obj, dict):
            raise StoreInvalid(f"{cls.WHERE}: expected an object, got {type(obj).__name__}")
        unknown = set(obj) - set(cls.TYPES)
        if unknown:
            raise StoreInvalid(f"{cls.WHERE}: unknown field(s) {', '.join(sorted(unknown))}")
        kwargs = {}
        for name, (types, optional) in cls.TYPES.items():
            value = _need(obj, name, types, cls.WHERE, optional=optional)
            if value is not None:
                kwargs[name] = _copy(value)
        return cls(**kwargs)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


@dataclass(slots=True)
class VirtualKey(_Flat):
    """A key's binding. ``allowed_pools``: ``None`` = every pool, ``[]`` = none. ``generation``
    rises on each rotation (a token of an older generation no longer verifies). ``deleted_at`` set
    = tombstoned: never live again, kept so attribution by id keeps resolving. ``revision`` is
    assigned by the store on every write (store-global, strictly increasing)."""

    WHERE: ClassVar[str] = "key"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {
        "id": (str, False), "name": (str, False), "generation": (int, False),
        "allowed_pools": (list, True), "enabled": (bool, False), "created_at": (int, False),
        "group": (str, True), "labels": (dict, True), "expires_at": (int, True), "deleted_at": (int, True),
        "revision": (int, True),
    }

    id: str
    name: str
    created_at: int
    generation: int = 0
    allowed_pools: list[str] | None = None
    enabled: bool = True
    group: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    expires_at: int | None = None
    deleted_at: int | None = None
    revision: int = 0

    @classmethod
    def from_wire(cls, obj: Any) -> Self:
        key = super(VirtualKey, cls).from_wire(obj)
        if key.allowed_pools is not None and not all(isinstance(p, str) for p in key.allowed_pools):
            raise StoreInvalid("key.allowed_pools: expected a list of pool names")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in key.labels.items()):
            raise StoreInvalid("key.labels: expected string keys and values")
        return key

    @property
    def is_live(self) -> bool:
        """Not tombstoned."""
        return self.deleted_at is None


@dataclass(slots=True)
class TierTokens:
    """One model's tokens by pricing tier (signed in a delta, >= 0 in a ledger)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def to_wire(self) -> dict[str, int]:
        return {"input": self.input, "output": self.output, "cache_read": self.cache_read,
                "cache_write": self.cache_write}

    @classmethod
    def from_wire(cls, obj: Any, where: str = "tokens") -> TierTokens:
        if not isinstance(obj, dict) or set(obj) - set(_TIERS):
            raise StoreInvalid(f"{where}: expected an object with input, output, cache_read, cache_write")
        return cls(*(_need(obj, t, int, where, optional=True) or 0 for t in _TIERS))

    def is_zero(self) -> bool:
        """All four tiers are 0."""
        return not (self.input or self.output or self.cache_read or self.cache_write)

    def plus(self, other: TierTokens, *, floor: bool) -> TierTokens:
        """Tier-wise sum; with ``floor`` every tier is clamped at 0 (a ledger never goes negative)."""
        vals = (self.input + other.input, self.output + other.output,
                self.cache_read + other.cache_read, self.cache_write + other.cache_write)
        return TierTokens(*(max(0, v) for v in vals)) if floor else TierTokens(*vals)


@dataclass(slots=True)
class UsageLedger:
    """A bucket window's counters: ``requests`` admitted (never refunded), ``billable_requests``
    (admitted minus non-2xx refunds: the per-request fee's base) and tokens per model."""

    requests: int = 0
    billable_requests: int = 0
    models: dict[str, TierTokens] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {"requests": self.requests, "billable_requests": self.billable_requests,
                "models": {m: t.to_wire() for m, t in sorted(self.models.items())}}

    @classmethod
    def from_wire(cls, obj: Any, where: str = "ledger") -> UsageLedger:
        models = _need(obj, "models", dict, where, optional=True) or {}
        return cls(_need(obj, "requests", int, where, optional=True) or 0,
                   _need(obj, "billable_requests", int, where, optional=True) or 0,
                   {str(m): TierTokens.from_wire(t, f"{where}.models.{m}") for m, t in models.items()})

    def apply(self, delta: UsageDelta) -> UsageLedger:
        """This ledger plus ``delta``, every counter floored at 0 (a new ledger; self is unchanged)."""
        models = dict(self.models)
        for model, tiers in delta.models.items():
            models[model] = models.get(model, TierTokens()).plus(tiers, floor=True)
        return UsageLedger(max(0, self.requests + delta.requests),
                           max(0, self.billable_requests + delta.billable_requests), models)

    def total_tokens(self) -> int:
        """Every tier of every model, summed."""
        return sum(t.input + t.output + t.cache_read + t.cache_write for t in self.models.values())


@dataclass(slots=True)
class UsageDelta:
    """A signed change to a :class:`UsageLedger` (what one node accrued since its last flush)."""

    requests: int = 0
    billable_requests: int = 0
    models: dict[str, TierTokens] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return UsageLedger(self.requests, self.billable_requests, self.models).to_wire()

    @classmethod
    def from_wire(cls, obj: Any, where: str = "delta") -> UsageDelta:
        led = UsageLedger.from_wire(obj, where)
        return cls(led.requests, led.billable_requests, led.models)

    def is_zero(self) -> bool:
        """Nothing to flush."""
        return not self.requests and not self.billable_requests and all(t.is_zero() for t in self.models.values())


@dataclass(slots=True)
class UsageItem:
    """One ``(bucket, window_start)`` of an additive flush and the delta to add to it."""

    bucket: str
    window_start: int
    delta: UsageDelta

    def to_wire(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "window_start": self.window_start, "delta": self.delta.to_wire()}

    @classmethod
    def from_wire(cls, obj: Any) -> UsageItem:
        return cls(_need(obj, "bucket", str, "usage item"), _need(obj, "window_start", int, "usage item"),
                   UsageDelta.from_wire(_need(obj, "delta", dict, "usage item"), "usage item.delta"))


@dataclass(slots=True)
class MeteringDelta(_Flat):
    """One completed response's consumption (or several coalesced), added to the
    ``(day, key_id, model, provider)`` row. ``day`` is ``YYYY-MM-DD`` (UTC)."""

    WHERE: ClassVar[str] = "metering"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {
        "day": (str, False), "key_id": (str, False), "model": (str, False), "provider": (str, False),
        "input": (int, True), "output": (int, True), "cache_read": (int, True), "cache_write": (int, True),
        "requests": (int, True), "billable_requests": (int, True), "key_group_at_use": (str, True),
    }

    day: str
    key_id: str
    model: str
    provider: str
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    requests: int = 0
    billable_requests: int = 0
    key_group_at_use: str = ""

    @property
    def row_key(self) -> tuple[str, str, str, str]:
        """The row this delta adds to: ``(day, key_id, model, provider)``."""
        return (self.day, self.key_id, self.model, self.provider)

    def plus(self, other: MeteringDelta) -> MeteringDelta:
        """The sum of two deltas of the same row (the later ``key_group_at_use`` wins)."""
        return replace(self, input=self.input + other.input, output=self.output + other.output,
                       cache_read=self.cache_read + other.cache_read,
                       cache_write=self.cache_write + other.cache_write, requests=self.requests + other.requests,
                       billable_requests=self.billable_requests + other.billable_requests,
                       key_group_at_use=other.key_group_at_use or self.key_group_at_use)


MeteringRow = MeteringDelta
"""A metering row as read back: the same fields as the delta, accumulated."""


@dataclass(slots=True)
class AuditRecord(_Flat):
    """One admin audit record; ``hash`` chains over ``prev_hash`` (computed and checked by the caller)."""

    WHERE: ClassVar[str] = "audit"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {
        "seq": (int, False), "ts": (int, False), "action": (str, False), "resource": (str, False),
        "outcome": (str, False), "principal": (str, False), "prev_hash": (str, False), "hash": (str, False),
    }

    seq: int
    ts: int
    action: str
    resource: str
    outcome: str
    principal: str
    prev_hash: str
    hash: str


@dataclass(slots=True)
class DenyEntry(_Flat):
    """A revoked subject: every token naming ``sub`` is refused. ``revision`` is store-assigned."""

    WHERE: ClassVar[str] = "deny"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {
        "sub": (str, False), "reason": (str, False), "ts": (int, False), "revision": (int, True),
    }

    sub: str
    reason: str
    ts: int
    revision: int = 0


@dataclass(slots=True)
class CredentialMeta(_Flat):
    """A row-looked-up credential without its secret. ``slot`` 0 or 1 (two live rows per
    ``(key_id, kind)`` allow overlap rotation); ``public_id`` is the wire lookup handle
    (``sigv4``: the access key id)."""

    WHERE: ClassVar[str] = "credential"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {
        "id": (str, False), "key_id": (str, False), "kind": (str, False), "slot": (int, False),
        "public_id": (str, False), "created_at": (int, False), "expires_at": (int, True),
        "revoked_at": (int, True), "revoke_reason": (str, True), "revision": (int, True),
    }

    id: str
    key_id: str
    kind: str
    slot: int
    public_id: str
    created_at: int
    expires_at: int | None = None
    revoked_at: int | None = None
    revoke_reason: str | None = None
    revision: int = 0

    def is_live(self, now: int) -> bool:
        """Not revoked and not expired at ``now``."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


@dataclass(slots=True)
class CredentialSecret:
    """A credential with its secret (``"v1:plain:<value>"``); ``repr`` never shows the secret."""

    meta: CredentialMeta
    secret: str = field(repr=False)

    def to_wire(self) -> dict[str, Any]:
        return {"meta": self.meta.to_wire(), "secret": self.secret}

    @classmethod
    def from_wire(cls, obj: Any) -> CredentialSecret:
        return cls(CredentialMeta.from_wire(_need(obj, "meta", dict, "credential")),
                   _need(obj, "secret", str, "credential"))
