"""The resolve step every connect-time guard shares: which addresses to check for a host.

:func:`unique_addresses` folds ``getaddrinfo`` answers into address strings (preference order,
deduplicated); :func:`system_resolver` is the blocking ``getaddrinfo`` resolver built on it;
:func:`host_addresses` decodes an IP literal in any spelling (no DNS) or resolves a name through
the caller's resolver. The verdict on those addresses is :meth:`HostGuard.check_addresses`.
"""
from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from busbar_sdk.ssrf._hosts import IPAddress, canonical_host
from busbar_sdk.ssrf._policy import SsrfBlocked

__all__ = ["SyncResolver", "host_addresses", "system_resolver", "unique_addresses"]

#: ``(host, port) -> addresses``: host is a canonical ASCII DNS name; addresses are IP strings or
#: ``ipaddress`` objects in preference order. Raises ``OSError`` (e.g. ``socket.gaierror``) on failure.
SyncResolver = Callable[[str, int], Sequence[str | IPAddress]]


def unique_addresses(infos: Iterable[tuple[Any, ...]]) -> list[str]:
    """The address strings of ``getaddrinfo`` 5-tuples ``(family, type, proto, canonname, sockaddr)``,
    in answer order, each once."""
    out: list[str] = []
    for *_, sockaddr in infos:
        addr = str(sockaddr[0])
        if addr not in out:
            out.append(addr)
    return out


def system_resolver(host: str, port: int) -> list[str]:
    """The default blocking resolver: ``socket.getaddrinfo`` (TCP), addresses in preference order,
    deduplicated. Raises ``OSError`` (``socket.gaierror``) when the name does not resolve."""
    return unique_addresses(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))


def host_addresses(host: str, port: int, resolver: SyncResolver, *, purpose: str) -> Sequence[str | IPAddress]:
    """The addresses to check for ``host``: an IP literal in any spelling as itself (no DNS), a name
    through ``resolver(canonical_name, port)``.

    Raises:
        SsrfBlocked: ``host`` is not a valid host (``"<purpose>: invalid host: ..."``).
        OSError: from ``resolver`` (the name does not resolve).
    """
    try:
        canon = canonical_host(host)
    except ValueError as e:
        raise SsrfBlocked(f"{purpose}: invalid host: {e}") from None
    return resolver(canon, port) if isinstance(canon, str) else [canon]
