"""The forwarder's connect-time SSRF enforcement for its sync (httpx/httpcore) path.

The policy itself is the sdk's (:mod:`busbar_sdk.ssrf`, the one the kernel uses too); this module
holds only what is specific to this plugin's HTTP clients: the resolver seam (:data:`RESOLVER`,
the sdk's ``system_resolver`` by default, replaced by tests) and :class:`GuardedBackend`, an httpcore network
backend that resolves the host once, checks every address with the settings' :class:`HostGuard`
(DNS rebinding: a mixed answer is refused whole) and connects only to a checked literal. The async
path (:mod:`busbar_webrequest_hook._aio`) does the same through an aiohttp resolver.

The rules (docs/hooks-firstparty.md): cloud metadata refused; loopback allowed, ``http://`` ok;
RFC 1918 / ULA / CGNAT / link-local refused; any other host ``https://``; ``settings.allow_hosts``
(hosts, IPs, CIDRs) is the one exception, for this forwarder instance only.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import httpcore
from busbar_sdk.ssrf import (
    HostGuard,
    IPAddress,
    SsrfBlocked,
    SyncResolver,
    deployment_policy,
    host_addresses,
    system_resolver,
)

__all__ = ["RESOLVER", "GuardedBackend", "settings_guard", "system_resolver"]

def settings_guard(allow_hosts: Sequence[str] = ()) -> HostGuard:
    """The guard of one settings generation: the deployment's ``security:`` policy (as the kernel
    set it), ``settings.url``'s purpose, loopback-only address rules, ``allow_hosts`` (already
    validated entries) as this instance's own exception, named in refusal hints."""
    return HostGuard(deployment_policy().with_allow_key("allow_hosts"), purpose="settings.url",
                     provider_allow=tuple(allow_hosts), allow_private=False)


#: ``(host, port) -> addresses``, looked up at connect time (tests replace it; no network needed).
RESOLVER: SyncResolver = system_resolver


def resolve(host: str, port: int) -> Sequence[str | IPAddress]:
    """The addresses to check for ``host``: a literal in any spelling as itself (no DNS), a name
    through :data:`RESOLVER`. Raises ``SsrfBlocked`` for an invalid host, ``OSError`` from DNS."""
    return host_addresses(host, port, RESOLVER, purpose="settings.url")


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore (sync) network backend: resolve, check every address, connect to a checked literal.

    TLS is unaffected: httpcore sends SNI and verifies the certificate against the URL's host name,
    not the address connected to. It runs only when the keep-alive pool opens a new connection.
    """

    def __init__(self, inner: httpcore.NetworkBackend, guard: HostGuard) -> None:
        self._inner = inner
        self._guard = guard

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            addresses = resolve(host, port)
        except OSError as e:
            raise httpcore.ConnectError(f"cannot resolve {host}: {e}") from None
        checked = self._guard.check_addresses(host, addresses)
        if not checked:
            raise httpcore.ConnectError(f"{host} resolved to no addresses")
        last: Exception = httpcore.ConnectError(f"cannot connect to {host}")
        for ip in checked:
            try:
                return self._inner.connect_tcp(str(ip), port, timeout=timeout, local_address=local_address,
                                               socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                last = e
        raise last

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise SsrfBlocked("unix-socket connections are not allowed through the SSRF guard")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
