"""The SSRF-guarded aiohttp connector: the upstream pool of the request path.

What lives here: :class:`GuardedResolver` (an aiohttp resolver that resolves with the injectable
:data:`~busbar.security.resolve.Resolver`, checks every address and hands aiohttp only checked
literals) and :func:`guarded_connector` (a keep-alive ``TCPConnector`` on it, with the idle-pool cap
and TCP keep-alive of docs/config-at-a-glance.md#limits). What must not: policy decisions
(:mod:`busbar_sdk.ssrf`) and the per-request URL verdict (the client calls
:meth:`HostGuard.check_url_parts` before every request; aiohttp skips the resolver for a canonical IP
literal, so that verdict is the one that covers literals, as ``check_host`` decodes them).

Pool shape: unlimited connections (the lanes' ``max_concurrent`` semaphores bound concurrency),
idle connections kept ``limits.pool_idle_timeout_secs`` and at most ``limits.pool_max_idle_per_host``
per (host, port, TLS) key (the oldest idle connection is closed first), TCP keep-alive probes after
60 s idle, connect timeout 10 s (set by the client's ``ClientTimeout``).

Source: C032 (c); docs/config-at-a-glance.md#security, docs/config-at-a-glance.md#limits
(pool_max_idle_per_host, pool_idle_timeout_secs, "TCP keepalive (60s)").
"""
from __future__ import annotations

import logging
import socket
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from busbar.security.resolve import HostGuard, Resolver, default_resolver, resolve_checked

__all__ = ["GuardedResolver", "guarded_connector", "TCP_KEEPALIVE_IDLE_S"]

log = logging.getLogger("busbar")

#: Seconds of idleness before the kernel sends TCP keep-alive probes on an upstream socket (fixed,
#: not configurable).
TCP_KEEPALIVE_IDLE_S = 60


class GuardedResolver(AbstractResolver):
    """aiohttp resolver: :func:`resolve_checked` with ``guard.check_addresses``.

    Returns the checked addresses as numeric results, so aiohttp connects to exactly what was checked
    (never re-resolving the name: no DNS-rebinding window). Raises :class:`SsrfBlocked` for a refused
    address and ``OSError`` for a name that does not resolve (aiohttp reports it as a
    ``ClientConnectorDNSError``).
    """

    def __init__(self, guard: HostGuard, resolver: Resolver | None = None):
        self.guard = guard
        self._resolver = resolver

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        checked = await resolve_checked(host, port, self.guard.check_addresses,
                                        self._resolver or default_resolver)
        flags = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
        return [{"hostname": host, "host": str(ip), "port": port,
                 "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                 "proto": 0, "flags": flags} for ip in checked]

    async def close(self) -> None:
        return None


def _keepalive_socket(addr_info: Any) -> socket.socket:
    """aiohttp ``socket_factory``: a TCP socket with keep-alive probes after 60 s idle."""
    family, type_, proto, _canon, _addr = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, TCP_KEEPALIVE_IDLE_S)
    return sock


class _CappedIdleConnector(aiohttp.TCPConnector):
    """``TCPConnector`` that keeps at most ``max_idle_per_host`` idle connections per key.

    aiohttp caps active connections (``limit_per_host``), not idle ones; the cap here trims the idle
    deque after each release, closing the oldest. It reaches into ``_release``/``_conns`` (aiohttp
    3.12–3.14); if those move, the cap is skipped with one warning rather than breaking requests.
    """

    def __init__(self, *, max_idle_per_host: int, **kwargs: Any):
        super().__init__(**kwargs)
        self._max_idle = max_idle_per_host
        self._cap_ok = isinstance(getattr(self, "_conns", None), dict)
        if not self._cap_ok:
            log.warning("aiohttp %s: limits.pool_max_idle_per_host cannot be applied", aiohttp.__version__)

    def _release(self, key, protocol, *args: Any, **kwargs: Any) -> None:  # noqa: ANN001
        super()._release(key, protocol, *args, **kwargs)
        if self._cap_ok:
            conns = self._conns.get(key)
            while conns is not None and len(conns) > self._max_idle:
                proto, _t = conns.popleft()
                proto.close()
            if conns is not None and not conns:
                del self._conns[key]


def guarded_connector(guard: HostGuard, *, max_idle_per_host: int, idle_timeout_s: float,
                      resolver: Resolver | None = None) -> aiohttp.TCPConnector:
    """The upstream keep-alive pool, SSRF-guarded at connect time.

    Args:
        guard: the purpose's :class:`HostGuard` (its ``check_addresses`` runs on every new connection).
        max_idle_per_host: ``limits.pool_max_idle_per_host`` (0 = no idle connection is kept).
        idle_timeout_s: ``limits.pool_idle_timeout_secs``.
        resolver: DNS seam, default :func:`~busbar.security.resolve.system_resolver`.
    Must be created inside a running event loop (aiohttp binds the loop).
    """
    return _CappedIdleConnector(
        max_idle_per_host=max_idle_per_host, limit=0, limit_per_host=0,
        keepalive_timeout=float(idle_timeout_s), resolver=GuardedResolver(guard, resolver),
        ttl_dns_cache=10, socket_factory=_keepalive_socket)
