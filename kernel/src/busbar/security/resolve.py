"""Resolve a host and check every address: the connect-time core shared by every guarded client.

What lives here: :data:`Resolver` (the injectable DNS seam), :func:`system_resolver` (the default,
``getaddrinfo`` off the event loop), :func:`default_resolver` (looks :func:`system_resolver` up at call
time so tests and embedders can monkeypatch it) and :func:`resolve_checked`. The httpx transport
(:mod:`busbar.security.transport`) and the aiohttp connector (:mod:`busbar.security.connector`) both
call :func:`resolve_checked` when they open a new connection, then connect to a checked literal.

Source: handout case C032 (c); ORIGINAL.md §2.18 ("every address checked"); seeds 001 "security".
"""
from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence

from busbar.security.hosts import IPAddress, canonical_host

__all__ = ["Check", "Resolver", "default_resolver", "resolve_checked", "system_resolver"]

#: ``async (host, port) -> addresses``: host is a canonical ASCII DNS name; addresses are IP strings or
#: ``ipaddress`` objects in preference order. Raise ``OSError`` (e.g. ``socket.gaierror``) on failure.
Resolver = Callable[[str, int], Awaitable[Sequence[str | IPAddress]]]

#: ``(host, addresses) -> checked addresses``: :meth:`SsrfPolicy.check_resolved` bound to one purpose;
#: raises :class:`~busbar.security.policy.SsrfBlocked`.
Check = Callable[[str, Sequence[str | IPAddress]], list[IPAddress]]


async def system_resolver(host: str, port: int) -> list[str]:
    """The default :data:`Resolver`: the system's ``getaddrinfo`` on the loop's executor."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = str(sockaddr[0])
        if addr not in out:
            out.append(addr)
    return out


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


class HostGuard:
    """One egress purpose's two SSRF checks, with the per-URL verdict cached.

    ``check_url_parts(scheme, host, port)`` runs :meth:`SsrfPolicy.check_host` once per distinct
    (scheme, host, port) — every request passes it, so a rewritten URL gets the config-time verdict —
    and ``check_addresses(host, addresses)`` is the connect-time :data:`Check` for
    :func:`resolve_checked`. Both raise :class:`~busbar.security.policy.SsrfBlocked`.
    """

    __slots__ = ("policy", "purpose", "_provider_allow", "_allow_private", "_require_https_public",
                 "_require_https", "_ok")
    _CACHE_MAX = 1024

    def __init__(self, policy, *, purpose: str, provider_allow: Sequence[str] = (), allow_private: bool,
                 require_https_public: bool = True, require_https: bool = False):
        self.policy = policy
        self.purpose = purpose
        self._provider_allow = tuple(provider_allow)
        self._allow_private = allow_private
        self._require_https_public = require_https_public
        self._require_https = require_https
        self._ok: dict[tuple[str, str, int | None], None] = {}

    def check_url_parts(self, scheme: str, host: str, port: int | None) -> None:
        """The request-time verdict on a URL (cached when it passes)."""
        key = (scheme, host, port)
        if key in self._ok:
            return
        self.policy.check_host(scheme, host, purpose=self.purpose, provider_allow=self._provider_allow,
                               allow_private=self._allow_private,
                               require_https_public=self._require_https_public,
                               require_https=self._require_https)
        if len(self._ok) >= self._CACHE_MAX:
            self._ok.clear()
        self._ok[key] = None

    def check_addresses(self, host: str, addresses: Sequence[str | IPAddress]) -> list[IPAddress]:
        """The connect-time verdict: every resolved address must pass (see ``check_resolved``)."""
        return self.policy.check_resolved(host, addresses, purpose=self.purpose,
                                          provider_allow=self._provider_allow,
                                          allow_private=self._allow_private)
