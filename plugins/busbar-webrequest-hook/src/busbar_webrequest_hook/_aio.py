"""The forwarder's on-loop transport: aiohttp on Busbar's event loop, SSRF-guarded at connect time.

Busbar awaits ``decide``/``transform`` through the plugin's async twin (``busbar_call.busbar_acall``)
on its own event loop: no worker thread, and the gate's deadline cancels the request in flight. This
module holds that path's HTTP side; the sync path (``httpx``, for taps and management) is unchanged.

* :class:`GuardedResolver`: aiohttp resolves every new connection's host through it: the name is
  resolved (``_connect.RESOLVER``, off the loop), every address is checked by the settings'
  ``HostGuard`` (the sdk's policy, the sync path's own verdict) and only the checked literals are
  returned, so the connection goes to an address that passed. An IP-literal URL is not resolved
  (aiohttp connects to it as is); it passed the same check at open/configure.
* :class:`LoopSessions`: one ``aiohttp.ClientSession`` per event loop per settings generation
  (keep-alive pool of ``max_connections``, ``keepalive_s``, TLS per ``ca_file``; no environment
  proxies, no redirects, no decompression).
* :func:`exchange`: one POST, bounded like the sync path (status, encoding, ``Content-Length``
  and streamed size caps, wall-clock ``timeout_ms``), mapped to the same ``WebRequestError``
  reasons.

Source: docs/hooks-firstparty.md#busbar-webrequest-hook, docs/hooks.md#what-a-hook-receives; C032, C035.
"""
from __future__ import annotations

import asyncio
import socket
import ssl
from typing import TYPE_CHECKING

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from busbar_sdk.ssrf import HostGuard, SsrfBlocked
from yarl import URL

from busbar_webrequest_hook import _connect
from busbar_webrequest_hook._errors import ReplyBuffer, WebRequestError, check_head, short

if TYPE_CHECKING:
    from busbar_webrequest_hook._settings import Settings

__all__ = ["GuardedResolver", "LoopSessions", "exchange"]


class GuardedResolver(AbstractResolver):
    """aiohttp resolver that returns only addresses the SSRF guard passed (raises ``SsrfBlocked``)."""

    def __init__(self, guard: HostGuard) -> None:
        self._guard = guard

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        addresses = await asyncio.get_running_loop().run_in_executor(None, _connect.resolve, host, port)
        checked = self._guard.check_addresses(host, addresses)
        if not checked:
            raise OSError(f"{host} resolved to no addresses")
        return [ResolveResult(hostname=host, host=str(ip), port=port,
                              family=socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                              proto=0, flags=socket.AI_NUMERICHOST) for ip in checked]

    async def close(self) -> None:
        return None


class LoopSessions:
    """The aiohttp sessions of one settings generation, one per event loop (made on first use)."""

    def __init__(self, settings: Settings, headers: dict[str, str]) -> None:
        self._settings = settings
        self._headers = headers
        self.url = URL(settings.url)        # parsed once per generation, not per message
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self._ssl: ssl.SSLContext | bool = (ssl.create_default_context(cafile=settings.ca_file)
                                            if settings.ca_file else True)

    def get(self) -> aiohttp.ClientSession:
        """This loop's session (call on the loop)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            s = self._settings
            connector = aiohttp.TCPConnector(limit=s.max_connections, keepalive_timeout=s.keepalive_s,
                                             resolver=GuardedResolver(s.guard), ssl=self._ssl)
            session = aiohttp.ClientSession(connector=connector, headers=self._headers, trust_env=False,
                                            auto_decompress=False, skip_auto_headers=("User-Agent",),
                                            timeout=aiohttp.ClientTimeout(total=s.timeout_s))
            self._sessions[loop] = session
        return session

    def close(self) -> None:
        """Close every session on its own loop (from any thread; a closed loop took its sockets)."""
        sessions, self._sessions = self._sessions, {}
        for loop, session in sessions.items():
            if session.closed:
                continue
            try:
                loop.call_soon_threadsafe(lambda s=session: asyncio.ensure_future(s.close()))
            except RuntimeError:        # the loop is gone: drop its transports without awaiting
                drop = getattr(session.connector, "_close", None)
                if drop is not None:
                    drop()


async def exchange(sessions: LoopSessions, settings: Settings, body: bytes, deadline: float, op: str,
                   where: str) -> bytes:
    """POST ``body`` to ``settings.url``; the reply's bytes. Raises ``WebRequestError`` (the status
    and size rules: ``_errors.check_head``)."""
    s = settings
    try:
        async with sessions.get().post(sessions.url, data=body, allow_redirects=False) as resp:
            check_head(resp.status, resp.headers, s, op, where)
            if resp.content_length is not None:     # declared and within max_reply_bytes: one read
                return await resp.read()
            buf = ReplyBuffer(s, deadline, op, where)
            async for chunk in resp.content.iter_chunked(65536):
                buf.add(chunk)
            return buf.value()
    except SsrfBlocked as e:
        raise WebRequestError("ssrf", e.reason) from None
    except (TimeoutError, aiohttp.ServerTimeoutError):
        raise WebRequestError("timeout", f"{op} to {where}: no reply within {s.timeout_s * 1000:.0f} ms "
                                         f"(settings.timeout_ms)") from None
    except aiohttp.ClientConnectorError as e:
        raise WebRequestError("connect", f"{op} to {where}: cannot connect: {short(e)}") from None
    except aiohttp.ClientError as e:
        raise WebRequestError("transport", f"{op} to {where}: {type(e).__name__}: {short(e)}") from None
