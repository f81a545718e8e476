"""The upstream HTTP client: one pooled keep-alive client per process, behind a narrow seam.

The request path (attempts, health probes, OAuth token minting) needs five things of an HTTP client:
send a request and get the status and headers, read a whole body, iterate raw body chunks as they
arrive, close early (which must close the upstream connection, case C026), and report transport
failures as one exception type. :class:`Upstream` is that seam:

- ``await up.send(method, url, headers, body, scope=provider) -> UpstreamResponse`` — returns at
  response headers; ``scope`` (the provider name, or ``None``) picks that provider's SSRF guard;
  the client's own wall-clock cap (``limits.upstream_request_timeout_secs``) covers the exchange;
  callers with a shorter budget wrap the call in ``asyncio.timeout`` (attempts: connect + headers;
  ``fetch``: the whole exchange), so a deadline always surfaces as ``TimeoutError``.
- ``UpstreamResponse``: ``status`` (int), ``headers`` (case-insensitive mapping), ``await read()``
  (whole body, bytes), ``chunks()`` (async iterator of decoded body ``bytes``; cancelling a pending
  ``__anext__`` loses no data, so keep-alive timers may wrap it), ``await aclose()`` (returns a fully
  read connection to the pool, closes an unfinished one).
- :class:`UpstreamError`: connect failure, reset, protocol error, socket read timeout (``str(e)``
  names it, never a credential). A refusal by the SSRF guard is :class:`SsrfBlocked`, not this.
- ``await read_capped(resp, max_bytes)``: the whole body, never more than ``max_bytes`` decoded bytes
  held (:class:`BodyTooLarge` past it; a ``content-length`` over the cap fails before any read). Every
  buffered upstream body goes through it (attempts, probes, token endpoints): a gzip bomb or a huge
  answer costs at most the cap, never its inflated size.

:class:`AiohttpUpstream` is the production client (aiohttp's C-accelerated HTTP/1.1 client on the
SSRF-guarded connector of :mod:`busbar.security.connector`): no redirects, no cookies, no proxies
from the environment, no auto ``User-Agent``/``Accept-Encoding``, a wall-clock cap of
``limits.upstream_request_timeout_secs`` per request (connect through the last body byte, as
docs/config-at-a-glance.md#limits says), connect timeout 10 s. It replaced httpx on the request path
because httpx + httpcore + h11 + anyio were 50–75 % of the gateway's CPU per request, with a pool
whose bookkeeping grows with the number of connections (bench/PROFILE.md, issue 2).
:class:`HttpxUpstream` adapts an ``httpx.AsyncClient``; ``Gateway.build(transport=...)`` uses it so
tests and benchmarks can inject ``httpx.MockTransport``.

Source: docs/config-at-a-glance.md#limits (upstream_request_timeout_secs, pool_*), docs/config-at-a-glance.md#security
"""
from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias
from urllib.parse import urlencode

import aiohttp
from busbar_sdk.ssrf import HostGuard
from yarl import URL

from busbar import __version__
from busbar.security.resolve import Resolver

if TYPE_CHECKING:
    import httpx

Body: TypeAlias = "bytes | list[bytes | memoryview]"
"""A request body: bytes, or chunks sent in order (an audio upload re-framed around views of the
received bytes, ``busbar.proxy.audio``; the caller sets ``content-length``)."""

CONNECT_TIMEOUT_S = 10.0
USER_AGENT = f"busbar/{__version__}"
#: Response-head limits: a header line up to 16 KiB and up to 256 headers, so the large heads the
#: httpx client accepted (h11 capped the whole head at 16 KiB) are still accepted; aiohttp's defaults
#: (8190 bytes, 128 headers) refused valid answers with one large header (CSP, cookies) or many CDN
#: headers, and the attempt failed over.
MAX_HEADER_LINE = 16384
MAX_HEADERS = 256
TOTAL_TIMEOUT_TEXT = "upstream request exceeded its wall-clock timeout (limits.upstream_request_timeout_secs)"


class UpstreamError(Exception):
    """A transport failure talking to an upstream (connect, reset, protocol error, read timeout)."""


class BodyTooLarge(UpstreamError):
    """An upstream body larger than the caller's cap (decoded bytes counted)."""


class UpstreamResponse(Protocol):
    """An upstream answer, open at its headers (see the module docstring)."""

    status: int
    headers: Mapping[str, str]

    async def read(self) -> bytes: ...
    def chunks(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


class Upstream(Protocol):
    """The client seam (see the module docstring)."""

    async def send(self, method: str, url: str, headers: Mapping[str, str],
                   body: Body = b"", *, scope: str | None = None) -> UpstreamResponse: ...
    async def aclose(self) -> None: ...


#: Body cap of :func:`fetch` (health probe and token endpoint answers are small JSON documents).
FETCH_MAX_BYTES = 1 << 20


async def read_capped(resp: UpstreamResponse, max_bytes: int, *, truncate: bool = False) -> bytes:
    """The whole body of ``resp``, holding at most ``max_bytes`` decoded bytes.

    Past the cap: ``truncate`` returns the first ``max_bytes`` bytes (error bodies, read only to be
    classified), otherwise raises :class:`BodyTooLarge`. A ``content-length`` over the cap on an
    unencoded body fails before any read. Raises ``UpstreamError`` on a transport failure. The caller
    closes ``resp`` (an unfinished body then closes the connection)."""
    declared = resp.headers.get("content-length")
    if (not truncate and declared is not None and declared.isdigit() and int(declared) > max_bytes
            and resp.headers.get("content-encoding", "identity") == "identity"):
        raise BodyTooLarge(f"upstream body of {declared} bytes exceeds the cap of {max_bytes} bytes")
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.chunks():
        size += len(chunk)
        if size > max_bytes:
            if truncate:
                parts.append(chunk[: len(chunk) - (size - max_bytes)])
                break
            raise BodyTooLarge(f"upstream body exceeds the cap of {max_bytes} bytes")
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def fetch(upstream: Upstream, method: str, url: str, headers: Mapping[str, str], body: bytes,
                timeout_s: float, max_bytes: int = FETCH_MAX_BYTES, *,
                scope: str | None = None) -> tuple[int, Mapping[str, str], bytes]:
    """One whole exchange (health probes, token endpoints): ``(status, headers, body)`` within
    ``timeout_s`` seconds, through ``scope``'s SSRF guard (a provider name, see :class:`AiohttpUpstream`),
    the body capped at ``max_bytes`` (:func:`read_capped`). Raises ``UpstreamError`` (``BodyTooLarge``
    included), ``TimeoutError``, ``SsrfBlocked``."""
    async with asyncio.timeout(timeout_s):
        resp = await upstream.send(method, url, headers, body, scope=scope)
        try:
            return resp.status, resp.headers, await read_capped(resp, max_bytes)
        finally:
            await resp.aclose()


def form_request(data: Mapping[str, str], basic: tuple[str, str] | None = None) -> tuple[dict[str, str], bytes]:
    """Headers and body of an ``application/x-www-form-urlencoded`` POST (OAuth token endpoints),
    with HTTP Basic client authentication when ``basic`` = (client_id, secret) (RFC 6749 §2.3.1)."""
    headers = {"content-type": "application/x-www-form-urlencoded", "accept": "application/json"}
    if basic is not None:
        token = base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode("ascii")
        headers["authorization"] = f"Basic {token}"
    return headers, urlencode(data).encode()


# ---------------------------------------------------------------------------------------------- aiohttp

_AIOHTTP_FAULTS = (aiohttp.ClientError, asyncio.TimeoutError)


def _upstream_error(e: BaseException) -> UpstreamError:
    """The :class:`UpstreamError` for one of ``_AIOHTTP_FAULTS``. ``asyncio.TimeoutError`` out of
    aiohttp (not a cancellation) is its wall-clock cap."""
    if isinstance(e, aiohttp.ClientError):
        return UpstreamError(_describe(e))
    return UpstreamError(TOTAL_TIMEOUT_TEXT)


def _describe(e: aiohttp.ClientError) -> str:
    """One line for an aiohttp failure; connector errors carry the OS-level reason (aiohttp's own
    message drops a resolver's text). A malformed response (``ClientResponseError``) is named by the
    first line of the parser's message only: its ``str`` carries a made-up status 400, the upstream
    URL (path and query: not the client's business) and a multi-line caret diagram."""
    if isinstance(e, aiohttp.ClientResponseError):
        first = str(e.message).split("\n", 1)[0].strip().rstrip(":")
        return f"{type(e).__name__}: {first}"
    text = f"{type(e).__name__}: {e}"
    cause = getattr(e, "os_error", None)
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text} ({cause})"
    return text


class _AiohttpChunks:
    """Raw chunks of an aiohttp body as they arrive (``readany``); cancel-safe."""

    __slots__ = ("_content",)

    def __init__(self, content: aiohttp.StreamReader):
        self._content = content

    def __aiter__(self) -> _AiohttpChunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            data = await self._content.readany()
        except _AIOHTTP_FAULTS as e:
            raise _upstream_error(e) from None
        if not data:
            raise StopAsyncIteration
        return data


class _AiohttpResponse:
    __slots__ = ("status", "headers", "_r")

    def __init__(self, r: aiohttp.ClientResponse):
        self._r = r
        self.status: int = r.status
        self.headers: Mapping[str, str] = r.headers

    async def read(self) -> bytes:
        try:
            return await self._r.read()
        except _AIOHTTP_FAULTS as e:
            raise _upstream_error(e) from None

    def chunks(self) -> _AiohttpChunks:
        return _AiohttpChunks(self._r.content)

    async def aclose(self) -> None:
        r = self._r
        if r.content.is_eof():
            r.release()          # fully read: the connection goes back to the pool
        else:
            r.close()            # unfinished: close the upstream connection (C026)


class _GuardedPool:
    """One SSRF guard, its keep-alive session (made on first use) and its parsed-URL cache."""

    __slots__ = ("guard", "session", "urls")

    def __init__(self, guard: HostGuard):
        self.guard = guard
        self.session: aiohttp.ClientSession | None = None
        self.urls: dict[str, URL] = {}


class AiohttpUpstream:
    """The production :class:`Upstream` (see the module docstring).

    Args:
        guard: the SSRF :class:`HostGuard` of purpose ``provider`` with no allow-list of its own (URL
            verdict per request, address verdict per new connection): every scope not in ``scoped``.
        total_timeout_s: ``limits.upstream_request_timeout_secs``: the wall-clock cap on one upstream
            request, connect through the last body byte (docs/config-at-a-glance.md#limits); a stream still running
            at the cap ends with ``UpstreamError`` (relayed as the ingress dialect's in-band error).
        max_idle_per_host, idle_timeout_s: ``limits.pool_max_idle_per_host`` / ``pool_idle_timeout_secs``.
        resolver: DNS seam for tests (default: the system resolver).
        scoped: provider name -> that provider's own :class:`HostGuard` (its ``allow_metadata_hosts``).
            Each distinct guard gets its own connection pool, so a connection opened under one
            provider's exception is never reused by another provider (docs/security.md "Scope of an
            exception").
    The aiohttp sessions are created on first use, inside the serving event loop.
    """

    def __init__(self, guard: HostGuard, *, total_timeout_s: float, max_idle_per_host: int,
                 idle_timeout_s: float, resolver: Resolver | None = None,
                 scoped: Mapping[str, HostGuard] | None = None):
        self.guard = guard
        self._total_timeout_s = total_timeout_s
        self._pool = (max_idle_per_host, idle_timeout_s, resolver)
        self._default = _GuardedPool(guard)
        by_guard: dict[int, _GuardedPool] = {}
        self._scoped: dict[str | None, _GuardedPool] = {}
        for name, g in (scoped or {}).items():
            self._scoped[name] = by_guard.setdefault(id(g), _GuardedPool(g))
        self._pools = [self._default, *by_guard.values()]

    def _open(self, pool: _GuardedPool) -> aiohttp.ClientSession:
        from busbar.security.connector import guarded_connector

        max_idle, idle_s, resolver = self._pool
        connector = guarded_connector(pool.guard, max_idle_per_host=max_idle, idle_timeout_s=idle_s,
                                      resolver=resolver)
        pool.session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=self._total_timeout_s, connect=CONNECT_TIMEOUT_S),
            auto_decompress=True, trust_env=False, headers={"user-agent": USER_AGENT},
            skip_auto_headers=("User-Agent", "Accept-Encoding"), raise_for_status=False,
            max_line_size=MAX_HEADER_LINE, max_field_size=MAX_HEADER_LINE, max_headers=MAX_HEADERS)
        return pool.session

    @staticmethod
    def _url(pool: _GuardedPool, url: str) -> URL:
        parsed = pool.urls.get(url)
        if parsed is None:
            parsed = URL(url, encoded=True)      # dialects build encoded URLs (SigV4 signs them as is)
            pool.guard.check_url_parts(parsed.scheme, parsed.host or "", parsed.explicit_port)
            if len(pool.urls) > 4096:
                pool.urls.clear()
            pool.urls[url] = parsed
        return parsed

    async def send(self, method: str, url: str, headers: Mapping[str, str],
                   body: Body = b"", *, scope: str | None = None) -> _AiohttpResponse:
        """Send one request through ``scope``'s guard (a provider name; ``None`` or a provider with no
        allow-list: the default guard); returns at response headers. Raises ``UpstreamError``,
        ``SsrfBlocked``."""
        pool = self._scoped.get(scope, self._default)
        session = pool.session or self._open(pool)
        target = self._url(pool, url)
        try:
            data = _chunks(body) if isinstance(body, list) else body or None
            r = await session.request(method, target, data=data, headers=headers,
                                      allow_redirects=False)
        except _AIOHTTP_FAULTS as e:
            raise _upstream_error(e) from None
        return _AiohttpResponse(r)

    async def aclose(self) -> None:
        for pool in self._pools:
            if pool.session is not None:
                await pool.session.close()
                pool.session = None


async def _chunks(body: list[bytes | memoryview]) -> AsyncIterator[bytes]:
    """A chunked ``Body`` as the async iterable both clients stream (views are sent, not copied)."""
    for chunk in body:
        yield chunk  # type: ignore[misc]  # a memoryview: both clients write any bytes-like object


# ------------------------------------------------------------------------------------------------ httpx

class _HttpxChunks:
    """``aiter_bytes`` (decoded, as aiohttp's chunks are) behind a cancel-safe ``__anext__`` (a
    cancelled wait keeps the pending read)."""

    __slots__ = ("_it", "_pending")

    def __init__(self, it: AsyncIterator[bytes]):
        self._it = it
        self._pending: asyncio.Future[bytes] | None = None

    def __aiter__(self) -> _HttpxChunks:
        return self

    async def __anext__(self) -> bytes:
        import httpx

        if self._pending is None:
            self._pending = asyncio.ensure_future(self._it.__anext__())
        try:
            data = await asyncio.shield(self._pending)
        except httpx.HTTPError as e:
            self._pending = None
            raise UpstreamError(f"{type(e).__name__}: {e}") from None
        except StopAsyncIteration:
            self._pending = None
            raise
        self._pending = None
        return data


class _HttpxResponse:
    __slots__ = ("status", "headers", "_r", "_chunks")

    def __init__(self, r: httpx.Response):
        self._r = r
        self.status: int = r.status_code
        self.headers: Mapping[str, str] = r.headers
        self._chunks: _HttpxChunks | None = None

    async def read(self) -> bytes:
        import httpx

        try:
            return await self._r.aread()
        except httpx.HTTPError as e:
            raise UpstreamError(f"{type(e).__name__}: {e}") from None

    def chunks(self) -> _HttpxChunks:
        self._chunks = _HttpxChunks(self._r.aiter_bytes())
        return self._chunks

    async def aclose(self) -> None:
        pending = self._chunks._pending if self._chunks is not None else None
        if pending is not None and not pending.done():
            pending.cancel()
        await self._r.aclose()


class HttpxUpstream:
    """:class:`Upstream` over an ``httpx.AsyncClient`` (injected transports: tests, benchmarks)."""

    def __init__(self, client: httpx.AsyncClient):
        self.client = client

    async def send(self, method: str, url: str, headers: Mapping[str, str],
                   body: Body = b"", *, scope: str | None = None) -> _HttpxResponse:
        import httpx

        content = _chunks(body) if isinstance(body, list) else body
        req = self.client.build_request(method, url, content=content, headers=headers)
        try:
            r = await self.client.send(req, stream=True)
        except httpx.TransportError as e:
            raise UpstreamError(f"{type(e).__name__}: {e}") from None
        return _HttpxResponse(r)

    async def aclose(self) -> None:
        await self.client.aclose()
