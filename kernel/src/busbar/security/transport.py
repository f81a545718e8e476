"""The SSRF-guarded httpx transport: connect-time enforcement of :class:`SsrfPolicy`.

What lives here: :func:`guarded_transport` (an ``httpx.AsyncHTTPTransport`` whose httpcore pool uses a
network backend that resolves the host itself, checks EVERY resolved address with
:meth:`SsrfPolicy.check_resolved`, and connects to a checked address literal), the default resolver,
and :func:`guarded_async_client`. What must not: policy decisions (those are
:mod:`busbar.security.policy`).

Why a network backend and not a pre-flight check: a check on the URL alone cannot see DNS. A name may
answer a public address when the config is validated and ``169.254.169.254`` when the connection is
made (DNS rebinding). Resolving once, checking, and connecting to the checked literal closes that window.
TLS is unaffected: httpcore sends SNI and verifies the certificate against the URL's host name, not the
address we connect to. Keep-alive pooling is unaffected: the backend only runs when the pool opens a new
connection.

Source: handout case C032 (c), (d); ORIGINAL.md §2.18 ("every address checked", "runtime clients refuse
redirects"); seeds 001 "security".
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import anyio
import httpcore
import httpx
from httpcore import AsyncNetworkBackend, AsyncNetworkStream

from busbar.security.hosts import IPAddress
from busbar.security.policy import SsrfBlocked, SsrfPolicy
from busbar.security.resolve import HostGuard, Resolver, default_resolver, resolve_checked, system_resolver

__all__ = ["GuardedTransport", "Resolver", "guarded_async_client", "guarded_transport", "system_resolver"]

class _GuardedBackend(AsyncNetworkBackend):
    """httpcore network backend: resolve, check every address, connect to a checked literal."""

    def __init__(self, inner: AsyncNetworkBackend, check: Callable[[str, Sequence[str | IPAddress]],
                                                                       list[IPAddress]],
                 resolver: Resolver):
        self._inner = inner
        self._check = check
        self._resolver = resolver

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> AsyncNetworkStream:
        deadline = None if timeout is None else anyio.current_time() + timeout
        try:
            with anyio.fail_after(timeout):
                checked = await resolve_checked(host, port, self._check, self._resolver)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as e:
            raise httpcore.ConnectError(str(e)) from None
        last: Exception = httpcore.ConnectError(f"cannot connect to {host}")
        for ip in checked:
            remaining = None if deadline is None else max(deadline - anyio.current_time(), 0.001)
            try:
                return await self._inner.connect_tcp(str(ip), port, timeout=remaining,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                last = e
        raise last

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> AsyncNetworkStream:
        raise SsrfBlocked("unix-socket connections are not allowed through the SSRF-guarded transport")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` with the SSRF guard at two points.

    1. Every request: :meth:`SsrfPolicy.check_host` on the request URL's scheme and host (cached per
       scheme/host/port), so a redirect target or a rewritten URL gets the config-time verdict too.
    2. Every new connection: the pool's network backend resolves the host, checks every address with
       :meth:`SsrfPolicy.check_resolved` and connects to a checked address literal.

    Build it with :func:`guarded_transport`. :class:`SsrfBlocked` propagates unchanged out of
    ``client.send`` (it is not an ``httpx.HTTPError``: it is a refusal, not a transport failure).
    """

    def __init__(self, policy: SsrfPolicy, *, purpose: str, provider_allow: Sequence[str] = (),
                 allow_private: bool, require_https_public: bool = True, require_https: bool = False,
                 resolver: Resolver | None = None, **httpx_transport_kwargs: Any):
        for banned in ("proxy", "uds"):
            if httpx_transport_kwargs.get(banned) is not None:
                raise ValueError(f"guarded_transport: {banned}= would bypass the SSRF guard's connect-time "
                                 f"check; it is not supported")
        super().__init__(**httpx_transport_kwargs)
        self.guard = HostGuard(policy, purpose=purpose, provider_allow=provider_allow,
                               allow_private=allow_private, require_https_public=require_https_public,
                               require_https=require_https)
        self.policy = policy
        self.purpose = purpose
        pool = getattr(self, "_pool", None)
        if not isinstance(pool, httpcore.AsyncConnectionPool) or not hasattr(pool, "_network_backend"):
            # Fail closed: never hand out an unguarded transport if httpx/httpcore internals moved.
            raise RuntimeError("guarded_transport: cannot install the SSRF-guarded network backend "
                               f"(httpx {httpx.__version__}, httpcore {httpcore.__version__})")

        pool._network_backend = _GuardedBackend(pool._network_backend, self.guard.check_addresses,
                                                resolver or default_resolver)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        self.guard.check_url_parts(url.scheme, url.host, url.port)
        return await super().handle_async_request(request)


def guarded_transport(policy: SsrfPolicy, *, purpose: str, provider_allow: Sequence[str] = (),
                      allow_private: bool, require_https_public: bool = True, require_https: bool = False,
                      resolver: Resolver | None = None,
                      **httpx_transport_kwargs: Any) -> httpx.AsyncBaseTransport:
    """Build the SSRF-guarded httpx async transport for one egress purpose.

    Args:
        policy: the process's :class:`SsrfPolicy` (build a new transport when the policy changes).
        purpose: label for reasons, e.g. ``"provider openai"``, ``"observability.otlp_url"``.
        provider_allow: that provider's ``allow_metadata_hosts``.
        allow_private: True for provider upstreams, False for hook sidecars, webhooks and OTLP.
        require_https_public, require_https: as :meth:`SsrfPolicy.check_url`.
        resolver: ``async (host, port) -> addresses``; default :func:`system_resolver`. Inject one in
            tests (no network) or to use a custom DNS client.
        **httpx_transport_kwargs: passed to ``httpx.AsyncHTTPTransport`` unchanged: ``limits``
            (``httpx.Limits``: pool size and keep-alive), ``http2``, ``verify``, ``cert``, ``retries``,
            ``local_address``, ``socket_options``. ``proxy`` and ``uds`` are refused (they would connect
            somewhere the guard does not see).

    Returns:
        a :class:`GuardedTransport`. Use it with ``httpx.AsyncClient(transport=..., trust_env=False,
        follow_redirects=False)`` (or :func:`guarded_async_client`): with ``trust_env=True`` httpx mounts
        env-configured proxies in front of the transport and the connect-time check would see the proxy.

    Raises:
        ValueError: ``proxy`` or ``uds`` given.
        RuntimeError: the installed httpx/httpcore cannot take the guarded backend (fail closed).

    Example::

        transport = guarded_transport(policy, purpose="provider openai", allow_private=True,
                                      provider_allow=cfg.providers["openai"].allow_metadata_hosts,
                                      limits=httpx.Limits(max_keepalive_connections=100), http2=True)
        client = httpx.AsyncClient(transport=transport, trust_env=False, follow_redirects=False)
    """
    return GuardedTransport(policy, purpose=purpose, provider_allow=provider_allow,
                            allow_private=allow_private, require_https_public=require_https_public,
                            require_https=require_https, resolver=resolver, **httpx_transport_kwargs)


_TRANSPORT_KEYS = ("verify", "cert", "http1", "http2", "limits", "retries", "local_address", "socket_options")


def guarded_async_client(policy: SsrfPolicy, *, purpose: str, provider_allow: Sequence[str] = (),
                         allow_private: bool, require_https_public: bool = True, require_https: bool = False,
                         resolver: Resolver | None = None, **client_kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` on :func:`guarded_transport`, with redirects off and env proxies ignored.

    Transport options (``limits``, ``http2``, ``verify``, ...) in ``client_kwargs`` go to the transport;
    the rest (``timeout``, ``headers``, ``base_url``, ...) to the client. ``follow_redirects`` defaults
    to False (handout C032 (d)); if a caller turns it on, every hop is still checked by the transport.
    ``transport``, ``mounts``, ``proxy`` and ``trust_env=True`` are refused: each would bypass the guard.
    """
    for banned in ("transport", "mounts", "proxy"):
        if client_kwargs.get(banned) is not None:
            raise ValueError(f"guarded_async_client: {banned}= would bypass the SSRF guard")
    if client_kwargs.pop("trust_env", False):
        raise ValueError("guarded_async_client: trust_env=True would route through env-configured proxies")
    transport_kwargs = {k: client_kwargs.pop(k) for k in _TRANSPORT_KEYS if k in client_kwargs}
    client_kwargs.setdefault("follow_redirects", False)
    transport = guarded_transport(policy, purpose=purpose, provider_allow=provider_allow,
                                  allow_private=allow_private, require_https_public=require_https_public,
                                  require_https=require_https, resolver=resolver, **transport_kwargs)
    return httpx.AsyncClient(transport=transport, trust_env=False, **client_kwargs)

