"""Where the issuer's signing keys come from: a JWKS URL (fetched through the SSRF guard, cached) or a file.

The URL is judged by :class:`busbar_sdk.ssrf.HostGuard` twice: the URL itself when settings load
(metadata endpoints, private ranges, ``http://`` off loopback are refused), and every address the
host resolves to when a connection opens (an httpcore network backend that connects only to a
checked literal, so DNS rebinding cannot reach a refused address).
"""
from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import httpcore
import httpx
from busbar_sdk.ssrf import HostGuard, SsrfBlocked, canonical_host, deployment_policy
from jwt import PyJWK, PyJWKSet
from jwt.exceptions import PyJWKSetError

__all__ = ["JwksSource", "jwks_guard"]

_MAX_BYTES = 1 << 20
_REFETCH_MIN_S = 10.0      # an unknown kid refetches at most this often


def jwks_guard(allow_hosts: Sequence[str] = ()) -> HostGuard:
    """The guard for ``settings.jwks_url``: the deployment's ``security:`` policy as the kernel set it
    (``busbar_sdk.ssrf.deployment_policy``, the one ``busbar --validate`` judges the URL with),
    loopback allowed, private ranges only via ``allow_hosts``."""
    return HostGuard(deployment_policy().with_allow_key("allow_hosts"), purpose="settings.jwks_url",
                     provider_allow=tuple(allow_hosts), allow_private=False)


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolve, check every address with the guard, connect to a checked literal only."""

    def __init__(self, inner: httpcore.NetworkBackend, guard: HostGuard) -> None:
        self._inner, self._guard = inner, guard

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        canon = canonical_host(host)
        addrs = ([str(a[4][0]) for a in socket.getaddrinfo(canon, port, type=socket.SOCK_STREAM)]
                 if isinstance(canon, str) else [canon])
        checked = self._guard.check_addresses(host, addrs)
        if not checked:
            raise httpcore.ConnectError(f"{host} resolved to no addresses")
        return self._inner.connect_tcp(str(checked[0]), port, timeout=timeout, local_address=local_address,
                                       socket_options=socket_options)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise SsrfBlocked("unix-socket connections are not allowed through the SSRF guard")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class JwksSource:
    """The issuer's keys by ``kid``.

    Args:
        url: ``jwks_url`` (already checked by the guard), or ``None``.
        file: ``jwks_file``, or ``None`` (exactly one of the two is set).
        cache_s: how long a fetched JWKS is used before it is fetched again.
        guard: the SSRF guard for ``url``.

    Raises (from :meth:`key`): nothing; an unknown kid or an unreachable issuer is ``None``.
    """

    def __init__(self, url: str | None, file: str | None, cache_s: int, guard: HostGuard) -> None:
        self.url, self.file, self.cache_s = url, file, cache_s
        self._keys: dict[str, PyJWK] = {}
        self._fetched = 0.0
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        if url is not None:
            transport = httpx.HTTPTransport()
            pool = transport._pool
            pool._network_backend = _GuardedBackend(pool._network_backend, guard)
            self._client = httpx.Client(transport=transport, timeout=5.0, follow_redirects=False)

    def _load(self) -> None:
        if self._client is not None and self.url is not None:
            r = self._client.get(self.url, headers={"accept": "application/json"})
            r.raise_for_status()
            if len(r.content) > _MAX_BYTES:
                raise ValueError("JWKS larger than 1 MiB")
            data = r.json()
        else:
            assert self.file is not None
            with open(self.file, encoding="utf-8") as f:
                data = json.load(f)
        keys = PyJWKSet.from_dict(data).keys
        self._keys = {k.key_id: k for k in keys if k.key_id}
        self._fetched = time.monotonic()

    def load_file(self) -> None:
        """Read ``jwks_file`` now (the plugin's open).

        Raises:
            ValueError: ``settings.jwks_file: cannot read <path> (<reason>)``, or ``... <path> holds no
                JWKS (<reason>)`` for a file that is not JSON, not a key set or has no usable key.
        """
        try:
            self._load()
        except OSError as e:
            raise ValueError(f"settings.jwks_file: cannot read {self.file} ({e.strerror or e})") from None
        except (ValueError, TypeError, AttributeError, PyJWKSetError) as e:
            raise ValueError(f"settings.jwks_file: {self.file} holds no JWKS ({e})") from None

    def key(self, kid: str) -> PyJWK | None:
        """The key ``kid``: cached, refetched when stale or (rate-limited) when the kid is unknown."""
        with self._lock:
            age = time.monotonic() - self._fetched
            stale = not self._keys or age > self.cache_s or (kid not in self._keys and age > _REFETCH_MIN_S)
            if stale:
                try:
                    self._load()
                except (OSError, ValueError, TypeError, AttributeError, httpx.HTTPError, PyJWKSetError, SsrfBlocked):
                    self._fetched = time.monotonic() if self._keys else 0.0
            return self._keys.get(kid)

    def close(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            self._client.close()
