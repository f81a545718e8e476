"""Resolve a host and check every address: the connect-time core shared by every guarded client.

What lives here: :data:`Resolver` (the injectable DNS seam), :func:`system_resolver` (the default,
``getaddrinfo`` off the event loop), :func:`default_resolver` (looks :func:`system_resolver` up at call
time so tests and embedders can monkeypatch it) and :func:`resolve_checked`. The aiohttp connector
(:mod:`busbar.security.connector`) calls :func:`resolve_checked` when it opens a new connection, then
connects to a checked literal. :class:`HostGuard` (the sdk's, :mod:`busbar_sdk.ssrf`) is re-exported.
"""
from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence

from busbar_sdk.ssrf import HostGuard, IPAddress, canonical_host, unique_addresses

__all__ = ["Check", "HostGuard", "Resolver", "default_resolver", "resolve_checked", "system_resolver"]

#: ``async (host, port) -> addresses``: host is a canonical ASCII DNS name; addresses are IP strings or
#: ``ipaddress`` objects in preference order. Raise ``OSError`` (e.g. ``socket.gaierror``) on failure.
Resolver = Callable[[str, int], Awaitable[Sequence[str | IPAddress]]]

#: ``(host, addresses) -> checked addresses``: :meth:`SsrfPolicy.check_resolved` bound to one purpose;
#: raises :class:`~busbar_sdk.ssrf.SsrfBlocked`.
Check = Callable[[str, Sequence[str | IPAddress]], list[IPAddress]]


async def system_resolver(host: str, port: int) -> list[str]:
    """The default :data:`Resolver`: the system's ``getaddrinfo`` on the loop's executor."""
    return unique_addresses(await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM))


async def default_resolver(host: str, port: int) -> Sequence[str | IPAddress]:
    """:func:`system_resolver`, looked up at call time (monkeypatchable in tests)."""
    return await sys.modules[__name__].system_resolver(host, port)


async def resolve_checked(host: str, port: int, check: Check, resolver: Resolver) -> list[IPAddress]:
    """The addresses to connect to for ``host``: an IP literal in any spelling is decoded (no DNS), a
    name is resolved with ``resolver``; every address is then checked with ``check``.

    Returns:
        the checked addresses, in resolver order (never empty).
    Raises:
        SsrfBlocked: the host is invalid, or one of its addresses is refused.
        OSError: the name does not resolve (``cannot resolve HOST: ...``) or resolves to nothing.
    """
    try:
        canon = canonical_host(host)
    except ValueError:
        check(host, ())  # raises SsrfBlocked naming the invalid host
        raise
    if not isinstance(canon, str):
        addresses: Sequence[str | IPAddress] = [canon]
    else:
        try:
            addresses = await resolver(canon, port)
        except OSError as e:
            raise OSError(f"cannot resolve {host}: {e}") from None
    checked = check(host, addresses)
    if not checked:
        raise OSError(f"{host} resolved to no addresses")
    return checked
