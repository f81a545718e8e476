"""Shared state: what a hook plugin keeps fleet-wide through the gateway's store.

A hook instance that implements the optional hook :func:`busbar_sdk.hookspec.busbar_bind_state`
receives a :class:`SharedState` once the gateway's store is open, when that store is shared (any
backend but ``memory``). It is the plugin's only way to the store: expiring values and windowed
counters, every name confined by the kernel to the instance's own namespace (``hook:<module>:<a
digest of the instance's settings and grants>:``), so an instance never sees another's data, and
the same instance (the same module and settings) on every node of a fleet shares one namespace.

Every method is synchronous, thread-safe, called from the plugin's worker threads (never on the
gateway's event loop: that raises :class:`SharedStateError`), bounded by ``timeout_s`` (at most
:data:`MAX_TIMEOUT_S`, default :data:`DEFAULT_TIMEOUT_S`), and raises

- :class:`SharedStateInvalid` (a ``ValueError``) for arguments outside the bounds below: the
  plugin's bug, raised before any I/O;
- :class:`SharedStateError` when the store cannot answer (unreachable, too slow, a store without
  the operation, the gateway shutting down). A plugin falls back to its in-process state then:
  a store fault must never fail a request.

Bounds: a key or counter name is 1..:data:`MAX_KEY_CHARS` characters; a value at most
:data:`MAX_VALUE_BYTES` bytes of UTF-8 text (keys and values without lone surrogates); a
``ttl_s`` in (0, :data:`MAX_TTL_S`] (rounded up to whole seconds); a counter window one of
:data:`WINDOWS_S` (aligned to the Unix epoch: a minute window starts at ``now - now % 60``);
``cap`` and ``amount`` integers >= 0.

Sidecar (out-of-process) hooks never receive a handle. A kernel older than this seam never calls
``busbar_bind_state`` (implement it with ``@hookimpl(optionalhook=True)`` so such a kernel still
loads the plugin): the plugin keeps its in-process state. :data:`SHARED_STATE_VERSION` is the
handle's ``version``.

Source: docs/plugins.md#shared-state, docs/stores.md#expiring-values.
"""
from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_KEY_CHARS",
    "MAX_TIMEOUT_S",
    "MAX_TTL_S",
    "MAX_VALUE_BYTES",
    "SHARED_STATE_VERSION",
    "WINDOWS_S",
    "SharedState",
    "SharedStateError",
    "SharedStateInvalid",
    "check_counter",
    "check_key",
    "check_put",
]

#: The version of this seam (the handle's ``version``).
SHARED_STATE_VERSION = 1
#: Longest key or counter name a plugin may use (characters).
MAX_KEY_CHARS = 256
#: Largest value (bytes of UTF-8).
MAX_VALUE_BYTES = 65536
#: Longest time to live (seconds): 30 days.
MAX_TTL_S = 30 * 86400
#: Counter windows (seconds): a minute, an hour, a day.
WINDOWS_S = (60, 3600, 86400)
#: Default and longest bound of one call (seconds).
DEFAULT_TIMEOUT_S = 0.25
MAX_TIMEOUT_S = 5.0


class SharedStateError(Exception):
    """The store could not answer (the message says why, never with a password); fall back."""


class SharedStateInvalid(ValueError):
    """An argument outside the documented bounds (a plugin bug); nothing was sent."""


@runtime_checkable
class SharedState(Protocol):
    """The handle a hook instance receives (see the module docstring).

    Attributes:
        version: :data:`SHARED_STATE_VERSION` of the kernel that made it.
        backend: the store's backend name (``sqlite``, ``postgres``, ``valkey``, a third party's).
        timeout_s: the bound of each call (seconds).
    """

    version: int
    backend: str
    timeout_s: float

    def get(self, key: str) -> str | None:
        """The value put under ``key``, or ``None`` (never put, or expired).

        Raises:
            SharedStateInvalid: a bad key. SharedStateError: the store did not answer.
        """
        ...

    def put(self, key: str, value: str, ttl_s: float) -> None:
        """Keep ``value`` under ``key`` for ``ttl_s`` seconds (last writer wins, fleet-wide).

        Raises:
            SharedStateInvalid: a bad key, value or ttl. SharedStateError: the store did not answer.
        """
        ...

    def admit(self, counter: str, window_s: int, cap: int, amount: int = 1) -> bool:
        """ONE atomic check-and-count over the fleet: when the counter's current window holds
        ``count + amount <= cap``, add ``amount`` and answer ``True``; otherwise change nothing and
        answer ``False``.

        Raises:
            SharedStateInvalid: a bad name, window, cap or amount. SharedStateError: no answer.
        """
        ...

    def add(self, counter: str, window_s: int, amount: int) -> None:
        """Add ``amount`` to the counter's current window without a check (spend after the fact).

        Raises:
            SharedStateInvalid: a bad name, window or amount. SharedStateError: no answer.
        """
        ...

    def count(self, counter: str, window_s: int) -> int:
        """The counter's total in its current window (0 when never counted).

        Raises:
            SharedStateInvalid: a bad name or window. SharedStateError: no answer.
        """
        ...


def check_key(key: object, what: str = "key") -> str:
    """``key`` when it is a ``str`` of 1..:data:`MAX_KEY_CHARS` characters.

    Raises:
        SharedStateInvalid: otherwise (or text with a lone surrogate), naming ``what``.
    """
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS:
        size = len(key) if isinstance(key, str) else type(key).__name__
        raise SharedStateInvalid(f"shared state: a {what} must be a string of 1..{MAX_KEY_CHARS} characters, "
                                 f"found {size}")
    if not key.isascii():
        _utf8(key, what)
    return key


def _utf8(text: str, what: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (which no store can keep) is :class:`SharedStateInvalid`."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise SharedStateInvalid(f"shared state: a {what} must be valid UTF-8 text (no lone surrogate)") from None


def check_put(key: object, value: object, ttl_s: object) -> int:
    """Validate ``put``'s arguments; returns the ttl in whole seconds (rounded up).

    Raises:
        SharedStateInvalid: a bad key, a value that is not text (or has a lone surrogate) or is over
            :data:`MAX_VALUE_BYTES`, a ttl outside (0, :data:`MAX_TTL_S`].
    """
    check_key(key)
    if not isinstance(value, str):
        raise SharedStateInvalid(f"shared state: a value must be a string, found {type(value).__name__}")
    size = len(_utf8(value, "value"))
    if size > MAX_VALUE_BYTES:
        raise SharedStateInvalid(f"shared state: a value must be at most {MAX_VALUE_BYTES} bytes of UTF-8, "
                                 f"found {size}")
    if type(ttl_s) not in (int, float) or not 0 < ttl_s <= MAX_TTL_S:  # type: ignore[operator]
        raise SharedStateInvalid(f"shared state: ttl_s must be a number in (0, {MAX_TTL_S}], found {ttl_s!r}")
    return max(1, math.ceil(float(ttl_s)))  # type: ignore[arg-type]


def check_counter(counter: object, window_s: object, *amounts: object) -> None:
    """Validate a counter call: the name, the window (one of :data:`WINDOWS_S`), each amount or
    cap an integer >= 0.

    Raises:
        SharedStateInvalid: the first fault.
    """
    check_key(counter, "counter name")
    if type(window_s) is not int or window_s not in WINDOWS_S:
        raise SharedStateInvalid(f"shared state: window_s must be one of {', '.join(map(str, WINDOWS_S))}, "
                                 f"found {window_s!r}")
    for a in amounts:
        if type(a) is not int or a < 0:
            raise SharedStateInvalid(f"shared state: caps and amounts must be integers >= 0, found {a!r}")
