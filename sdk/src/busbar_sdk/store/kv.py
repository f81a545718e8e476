"""Expiring named values (``kv_get`` / ``kv_put``): the store side of a hook's shared state.

A value is text (at most :data:`KV_MAX_VALUE_BYTES` bytes of UTF-8) under a name of at most
:data:`KV_MAX_NAME_CHARS` characters, kept until ``expires_at`` (Unix seconds). ``kv_get(name,
now)`` answers ``None`` once ``now >= expires_at``, whether or not the backend has dropped the row
yet: valkey expires the key itself (``EXPIREAT``); the SQL and memory stores drop expired rows at
most once a minute per handle, on a write (the SQL stores at most :data:`KV_SWEEP_BATCH` rows a
write, sweeping again on the next write until a sweep drops fewer). Last writer wins; there is no compare-and-set.

The names are chosen by the kernel (``busbar.store.shared``: ``hook:<module>:<instance digest>:
<the plugin's key>``), never by a plugin directly. Source: docs/stores.md#expiring-values.
"""
from __future__ import annotations

from busbar_sdk.store.errors import StoreInvalid

__all__ = ["KV_MAX_NAME_CHARS", "KV_MAX_VALUE_BYTES", "KV_SWEEP_BATCH", "KV_SWEEP_EVERY_S", "check_kv"]

#: Longest name a store keeps (characters).
KV_MAX_NAME_CHARS = 512
#: Largest value a store keeps (bytes of UTF-8).
KV_MAX_VALUE_BYTES = 65536
#: Seconds between two sweeps of expired rows by one SQL or memory store handle.
KV_SWEEP_EVERY_S = 60
#: Most expired rows one SQL sweep drops (it runs inside a write a routing decision waits for); a
#: sweep that drops a full batch leaves the next write to sweep again.
KV_SWEEP_BATCH = 1000


def check_kv(name: str, value: str | None = None, expires_at: int | None = None) -> None:
    """Validate ``kv_put``'s (or ``kv_get``'s) arguments.

    Raises:
        StoreInvalid: an empty or too long name, a value over :data:`KV_MAX_VALUE_BYTES`, an
            ``expires_at`` that is not a positive integer.
    """
    if not name or len(name) > KV_MAX_NAME_CHARS:
        raise StoreInvalid(f"kv name must be 1..{KV_MAX_NAME_CHARS} characters, found {len(name)}")
    if value is not None and len(value.encode("utf-8")) > KV_MAX_VALUE_BYTES:
        raise StoreInvalid(f"kv value must be at most {KV_MAX_VALUE_BYTES} bytes of UTF-8")
    if expires_at is not None and (type(expires_at) is not int or expires_at <= 0):
        raise StoreInvalid(f"kv expires_at must be a positive integer (Unix seconds), found {expires_at!r}")
