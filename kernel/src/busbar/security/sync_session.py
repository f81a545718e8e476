"""A ``requests`` session whose every new connection is SSRF-checked at connect time (sync clients).

What lives here: :func:`guarded_session`, a ``requests.Session`` (no redirects, nothing from the
environment) whose urllib3 pools open connections through :func:`checked_socket`: the host is
resolved once (the sdk's ``host_addresses`` through :func:`default_resolver`, the seam tests
replace; an IP literal in any spelling is decoded, no DNS), every address is judged by the
purpose's :class:`~busbar_sdk.ssrf.HostGuard` (``check_addresses``: the sdk's rule, the one the
aiohttp connector applies too; a mixed answer is refused whole, which is how DNS rebinding looks)
and the socket connects to a checked literal only, never to a second resolution. TLS is
unaffected: urllib3 still sends SNI and verifies the certificate against the URL's host name. A
refusal raises :class:`~busbar_sdk.ssrf.SsrfBlocked` (not a connection error, so clients do not
retry it) after ``on_refused(exc)`` has run.

Used by the OTLP trace exporter (``busbar.observe.otlp_export``), which POSTs through a ``requests``
session. The async clients use :mod:`busbar.security.connector`.

Source: docs/security.md (SSRF guard), docs/operations.md#traces-otlp.
"""
from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

import requests
from busbar_sdk.ssrf import HostGuard, IPAddress, SsrfBlocked, SyncResolver, host_addresses, system_resolver
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as u3_connection

__all__ = ["checked_socket", "default_resolver", "guarded_session", "system_resolver"]

#: ``(guard's refusal) -> None``: told about each connection the guard refused (count it, log it).
OnRefused = Callable[[SsrfBlocked], None]


def default_resolver(host: str, port: int) -> Sequence[str | IPAddress]:
    """:func:`system_resolver`, looked up at call time (monkeypatchable in tests)."""
    resolver: SyncResolver = sys.modules[__name__].system_resolver
    return resolver(host, port)


def checked_socket(conn: HTTPConnection, guard: HostGuard, on_refused: OnRefused) -> socket.socket:
    """A connected socket for urllib3 connection ``conn``, to a checked address of its host.

    Raises:
        SsrfBlocked: the host is invalid or one of its addresses is refused (``on_refused`` ran first).
        NameResolutionError: the name does not resolve.
        ConnectTimeoutError, NewConnectionError: no checked address accepted the connection.
    """
    host, port = conn._dns_host, conn.port
    try:
        addresses = host_addresses(host, port, default_resolver, purpose=guard.purpose)
    except SsrfBlocked as e:
        on_refused(e)
        raise
    except OSError as e:
        raise NameResolutionError(host, conn, e if isinstance(e, socket.gaierror)
                                  else socket.gaierror(str(e))) from None
    try:
        checked = guard.check_addresses(host, addresses)
    except SsrfBlocked as e:
        on_refused(e)
        raise
    if not checked:
        raise NewConnectionError(conn, f"{host} resolved to no addresses")
    last: OSError | None = None
    for ip in checked:
        try:
            return u3_connection.create_connection((str(ip), port), conn.timeout,
                                                   source_address=conn.source_address,
                                                   socket_options=conn.socket_options)
        except TimeoutError:
            raise ConnectTimeoutError(conn, f"connection to {host} ({ip}) timed out after "
                                            f"{conn.timeout} s") from None
        except OSError as e:
            last = e
    raise NewConnectionError(conn, f"cannot connect to {host}: {last}")


def guarded_session(guard: HostGuard, on_refused: OnRefused) -> requests.Session:
    """A ``requests.Session`` whose connections go through :func:`checked_socket` with ``guard``.
    Redirects are refused (``max_redirects = 0``), proxies and netrc from the environment ignored."""

    def new_conn(self: HTTPConnection) -> socket.socket:
        return checked_socket(self, guard, on_refused)

    plain = type("GuardedHTTPConnection", (HTTPConnection,), {"_new_conn": new_conn})
    tls = type("GuardedHTTPSConnection", (HTTPSConnection,), {"_new_conn": new_conn})
    pools = {"http": type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": plain}),
             "https": type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": tls})}

    class GuardedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

    session = requests.Session()
    session.max_redirects = 0
    session.trust_env = False
    adapter = GuardedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
