"""busbar-webrequest-hook: forward every hook message to an HTTP sidecar, SSRF-guarded.

The first-party forwarder of docs/hooks-firstparty.md#busbar-webrequest-hook: a transparent relay that POSTs each
message Busbar gives it over ``busbar_call`` — the op-discriminated JSON, unchanged — to ``settings.url``
and hands the sidecar's JSON reply back. The sidecar (any language; ``busbar_sdk.sidecar`` serves a
Python hook class unchanged) runs in its own process, so untrusted logic never enters Busbar's
address space. The kernel's reply normalizers read the reply; this plugin adds a hop, never a
second copy of the wire semantics.

What it guarantees (docs/hooks.md#what-a-hook-receives; C032, C035):

* SSRF: ``settings.url`` is checked at open and at every configure (loopback allowed; RFC 1918,
  unique-local, CGNAT, link-local and cloud-metadata refused; remote must be ``https://``) and
  every address the host resolves to is checked again at connect time, where the connection goes
  to the checked literal (the sdk's policy, :mod:`busbar_sdk.ssrf`;
  :mod:`busbar_webrequest_hook._connect`). Redirects are never followed; environment proxies are
  ignored.
* Bounded: one keep-alive pool (``max_connections``), a wall-clock ``timeout_ms`` per message, a
  reply capped at ``max_reply_bytes`` before it is read and ``max_reply_depth`` before it is parsed.
* Errors are errors: a non-2xx status, an empty body, a body that is not a JSON object, a refused
  address, a timeout all raise (the gate's ``on_error`` applies); only a ``200 {}`` abstains.

Message by message:

=============  ==========================================================================
``decide``     relayed; the sidecar's reply returned verbatim
``transform``  relayed; the sidecar's reply returned verbatim
``notify``     relayed; the reply body is read (bounded) and discarded; ``{}`` returned
other ``op``   not relayed; ``{}`` ("not for me")
configure      the new settings are validated (a fault: no ack), relayed to the sidecar
               (``headers`` left out) through a pool built for them; committed only when the
               sidecar acks the exact ``settings_version``, which is then acked
describe       the forwarder's own settings schema, with the sidecar's ``schema.properties``
               merged in when it answers one (forwarder keys win)
status         the sidecar's status, with the forwarder's metrics appended (64 entries at
               most); the forwarder's own status when the sidecar has none
=============  ==========================================================================

Source: docs/hooks-firstparty.md#busbar-webrequest-hook, docs/hooks.md#management-messages;
docs/configuration.md#startup-checks
"""
from __future__ import annotations

import asyncio
import copy
import json
import ssl
import threading
import time
from typing import Any, ClassVar

import httpcore
import httpx
import orjson
from busbar_sdk import HookPlugin, PayloadError, PluginExport, hookimpl
from busbar_sdk.ssrf import SsrfBlocked, redact_url

from busbar_webrequest_hook._aio import LoopSessions
from busbar_webrequest_hook._aio import exchange as aexchange
from busbar_webrequest_hook._connect import GuardedBackend
from busbar_webrequest_hook._errors import ReplyBuffer, WebRequestError, check_head, short
from busbar_webrequest_hook._metrics import Metrics
from busbar_webrequest_hook._reply import ReplyError, parse_reply
from busbar_webrequest_hook._settings import SETTINGS_SCHEMA, Settings, SettingsError, parse_settings

__all__ = ["SETTINGS_SCHEMA", "WebRequestError", "WebRequestHook", "plugin"]

__version__ = "1.5.0"
_USER_AGENT = f"busbar-webrequest-hook/{__version__}"
_MAX_METRICS = 64


class _Conn:
    """One settings generation: validated settings and the keep-alive pool built for them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.shown_url = redact_url(settings.url)
        verify: ssl.SSLContext | bool = (ssl.create_default_context(cafile=settings.ca_file)
                                         if settings.ca_file else True)
        transport = httpx.HTTPTransport(
            verify=verify, retries=0,
            limits=httpx.Limits(max_connections=settings.max_connections,
                                max_keepalive_connections=settings.max_keepalive_connections,
                                keepalive_expiry=settings.keepalive_s))
        pool = getattr(transport, "_pool", None)
        if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
            # Fail closed: never hand out an unguarded pool if httpx/httpcore internals moved.
            raise RuntimeError(f"cannot install the SSRF guard into httpx {httpx.__version__} / httpcore "
                               f"{httpcore.__version__}")
        pool._network_backend = GuardedBackend(pool._network_backend, settings.guard)
        headers = {"content-type": "application/json", "accept": "application/json",
                   "accept-encoding": "identity", "user-agent": _USER_AGENT, **settings.headers}
        self.client = httpx.Client(transport=transport, trust_env=False, follow_redirects=False,
                                   timeout=httpx.Timeout(settings.timeout_s), headers=headers)
        self.sessions = LoopSessions(settings, headers)     # the on-loop path (decide/transform)

    def close(self) -> None:
        self.client.close()
        self.sessions.close()


class _Outcome:
    """One forwarded message in flight: when it started and its error label (``None`` = ok).

    A context manager around the exchange (a class, not a generator: it runs on every message):
    entering counts the message in flight; leaving records its latency and outcome, and maps a
    ``ReplyError`` to ``WebRequestError`` (a cancellation by Busbar's deadline counts as ``timeout``).
    """

    __slots__ = ("conn", "error", "metrics", "op", "started")

    def __init__(self, conn: _Conn, op: str, metrics: Metrics) -> None:
        self.conn = conn
        self.op = op
        self.metrics = metrics
        self.started = time.monotonic()
        self.error: str | None = "transport"

    def __enter__(self) -> _Outcome:
        self.metrics.begin()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        try:
            if isinstance(exc, ReplyError):
                self.error = exc.reason
                raise WebRequestError(exc.reason, f"{self.op} to {self.conn.shown_url}: {exc}") from None
            if isinstance(exc, WebRequestError):
                self.error = exc.reason
            elif isinstance(exc, asyncio.CancelledError):
                self.error = "timeout"          # Busbar's deadline cut it
        finally:
            self.metrics.end(self.op, (time.monotonic() - self.started) * 1000.0, self.error)

    def reply(self, data: bytes, discard: bool) -> dict[str, Any]:
        out = {} if discard else parse_reply(data, max_depth=self.conn.settings.max_reply_depth)
        self.error = None
        return out


class WebRequestHook(HookPlugin):
    """The forwarder; one instance per configured hook ref (``busbar_open``)."""

    settings_schema: ClassVar[dict[str, Any] | None] = SETTINGS_SCHEMA

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        try:
            parsed = parse_settings(settings)
        except SettingsError as e:
            raise ValueError(f"busbar-webrequest-hook: {e}") from None
        self._conn = _Conn(parsed)
        self._metrics = Metrics()
        self._lock = threading.Lock()
        self._retired: list[tuple[float, _Conn]] = []
        self._closed = False

    # ------------------------------------------------------------------------- dispatch

    def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Route one message; dict in, dict out, unknown fields relayed untouched."""
        if "configure" in payload:
            return self._configure(payload)
        if "describe" in payload:
            return self._describe()
        if "status" in payload:
            return self._status()
        op = payload.get("op")
        if op in ("decide", "transform"):
            return self._post(self._conn, payload, str(op))
        if op == "notify":
            self._post(self._conn, payload, "notify", discard=True)
            return {}
        return {}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            retired, self._retired = self._retired, []
        for _, conn in retired:
            conn.close()
        self._conn.close()

    # ------------------------------------------------------------------------- transport

    async def ahandle(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The async twin of :meth:`handle` (Busbar awaits it on its event loop for ``decide`` and
        ``transform``): the same routing and errors, the HTTP exchange on aiohttp; management
        messages take the sync path on a thread."""
        if "configure" in payload or "describe" in payload or "status" in payload:
            return await asyncio.to_thread(self.handle, payload)
        op = payload.get("op")
        if op in ("decide", "transform"):
            return await self._apost(self._conn, payload, str(op))
        if op == "notify":
            await self._apost(self._conn, payload, "notify", discard=True)
        return {}

    def _post(self, conn: _Conn, payload: dict[str, Any], op: str, *, discard: bool = False) -> dict[str, Any]:
        body = _encode(payload, op)
        with self._measured(conn, op) as outcome:
            data = self._exchange(conn, body, outcome.started + conn.settings.timeout_s, op)
            return outcome.reply(data, discard)

    async def _apost(self, conn: _Conn, payload: dict[str, Any], op: str, *, discard: bool = False) -> dict[str, Any]:
        body = _encode(payload, op)
        with self._measured(conn, op) as outcome:
            data = await aexchange(conn.sessions, conn.settings, body, outcome.started + conn.settings.timeout_s, op,
                                   conn.shown_url)
            return outcome.reply(data, discard)

    def _measured(self, conn: _Conn, op: str) -> _Outcome:
        """One forwarded message's metrics bracket and error mapping (both transports): ``with``
        it around the exchange (see :class:`_Outcome`)."""
        return _Outcome(conn, op, self._metrics)

    def _exchange(self, conn: _Conn, body: bytes, deadline: float, op: str) -> bytes:
        s, where = conn.settings, conn.shown_url
        try:
            with conn.client.stream("POST", s.url, content=body) as resp:
                check_head(resp.status_code, resp.headers, s, op, where)
                buf = ReplyBuffer(s, deadline, op, where)
                for chunk in resp.iter_raw():
                    buf.add(chunk)
                return buf.value()
        except SsrfBlocked as e:
            raise WebRequestError("ssrf", e.reason) from None
        except httpx.TimeoutException:
            raise WebRequestError("timeout", f"{op} to {where}: no reply within {s.timeout_s * 1000:.0f} ms "
                                             f"(settings.timeout_ms)") from None
        except httpx.ConnectError as e:
            raise WebRequestError("connect", f"{op} to {where}: cannot connect: {short(e)}") from None
        except httpx.HTTPError as e:
            raise WebRequestError("transport", f"{op} to {where}: {type(e).__name__}: {short(e)}") from None

    # ------------------------------------------------------------------------- management

    def _configure(self, payload: dict[str, Any]) -> dict[str, Any]:
        body = payload.get("configure")
        if not isinstance(body, dict):
            raise PayloadError("configure: the message body must be an object")
        version = body.get("settings_version")
        if type(version) is not int:
            raise PayloadError("configure: settings_version must be an integer")
        try:
            new = _Conn(parse_settings(body.get("settings", {})))
        except SettingsError as e:
            raise WebRequestError("settings", f"configure refused, nothing committed: {e}") from None
        relay = {**payload, "configure": {**body, "settings": new.settings.for_sidecar()}}
        try:
            reply = self._post(new, relay, "configure")
            ack = reply.get("ack")
            if not (isinstance(ack, dict) and type(ack.get("settings_version")) is int
                    and ack["settings_version"] == version):
                raise WebRequestError("no_ack", f"configure: the sidecar at {new.shown_url} did not acknowledge "
                                                f"settings_version {version} (it answered {_brief(reply)}); "
                                                f"nothing committed")
        except BaseException:
            new.close()
            raise
        with self._lock:
            old, self._conn = self._conn, new
            self.settings = dict(new.settings.raw)
            self.settings_version = version
            # In-flight messages may still use the old pool: close it once they must have ended.
            now = time.monotonic()
            self._retired.append((now + old.settings.timeout_s + 1.0, old))
            due = [c for t, c in self._retired if t <= now]
            self._retired = [(t, c) for t, c in self._retired if t > now]
        for conn in due:
            conn.close()
        return {"ack": {"settings_version": version}}

    def _describe(self) -> dict[str, Any]:
        schema = copy.deepcopy(SETTINGS_SCHEMA)
        try:
            reply = self._post(self._conn, {"describe": True}, "describe")
        except WebRequestError:
            return {"schema": schema}
        theirs = reply.get("schema")
        if isinstance(theirs, dict) and isinstance(theirs.get("properties"), dict):
            schema["properties"] = {**theirs["properties"], **schema["properties"]}
            required = theirs.get("required")
            if isinstance(required, list):
                schema["required"] = list(dict.fromkeys([*schema["required"],
                                                         *(r for r in required if isinstance(r, str))]))
        return {"schema": schema}

    def _status(self) -> dict[str, Any]:
        try:
            reply = self._post(self._conn, {"status": True}, "status")
        except WebRequestError:
            reply = {}
        own = self._metrics.snapshot()
        theirs = reply.get("status")
        if isinstance(theirs, dict) and type(theirs.get("settings_version")) is int:
            metrics = theirs.get("metrics")
            relayed = [m for m in metrics if isinstance(m, dict)] if isinstance(metrics, list) else []
            return {"status": {**theirs, "metrics": relayed[:max(0, _MAX_METRICS - len(own))] + own}}
        return {"status": {"settings_version": self.settings_version if self.settings_version is not None else 0,
                           "settings": self._conn.settings.redacted(), "metrics": own}}


#: orjson hands these types back (a ``TypeError``) instead of writing what ``json`` would refuse.
_ORJSON_STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _encode(payload: dict[str, Any], op: str) -> bytes:
    """``payload`` as compact UTF-8 JSON. orjson writes it (~15x faster than ``json``); a message it
    refuses (non-str keys, invalid strings, big ints, subclasses, dates, dataclasses) or that holds a
    ``null`` (Busbar's messages carry none: optional fields are absent, and orjson writes NaN and
    infinities as ``null``) is written by ``json`` instead, with its exact verdict (NaN, infinities
    and unserializable values refused: ``PayloadError``). Busbar's messages hold JSON types only;
    a UUID or a plain ``Enum`` (which ``json`` refuses) would be written as orjson writes it."""
    try:
        data = orjson.dumps(payload, option=_ORJSON_STRICT)
        if b"null" not in data:
            return data
    except TypeError:
        pass
    try:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise PayloadError(f"{op} message is not JSON-serializable: {e}") from None


def _brief(reply: dict[str, Any]) -> str:
    text = json.dumps(reply, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."


class _Export(PluginExport):
    """``export_plugin(WebRequestHook)`` plus the async twin Busbar awaits on its event loop."""

    @hookimpl
    def busbar_call(self, handle: WebRequestHook, payload: dict[str, Any]) -> dict[str, Any]:
        return handle.handle(payload)


async def _acall(handle: WebRequestHook, payload: dict[str, Any]) -> dict[str, Any]:
    return await handle.ahandle(payload)


_Export.busbar_call.busbar_acall = _acall      # type: ignore[attr-defined]  # no thread, cancellable

plugin = _Export(WebRequestHook)
