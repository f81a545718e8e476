"""The typed facade over one opened hook instance: one method per operation, never ``call`` by string.

:class:`HookFacade` wraps a :class:`busbar.loader.PluginInstance` (anything with ``call(payload)
-> dict``) and owns where its code runs:

==================  =========================================================================
``decide``          queue a gate decision on the hook's :class:`WorkerPool`; the worker also
                    normalizes the reply (``reply.read_decide``), so garbage never reaches the loop
                    (a plugin declaring ``busbar_call.busbar_inline = True`` runs right here instead:
                    no thread hand-off; one call past its deadline demotes it to the pool for good)
``transform``       the same for a rewrite pass (``reply.read_transform``)
                    (a plugin with an async twin, ``busbar_call.busbar_acall``, runs either as a
                    task on the event loop instead: no thread, and the deadline cancels it)
``notify``          offer a tap observation to the hook's bounded tap queue (dropped when full)
``configure``       push settings; True only on the exact ``settings_version`` ack
``describe``        the settings JSON Schema, or ``None``
``status``          the observed state (:class:`busbar.hooks.mgmt.StatusReport`), or ``None``
==================  =========================================================================

Management calls ride their own thread (5 s deadline) and never occupy a request-path worker.
Counters (``calls``, ``timeouts``, ``errors``, ``garbage``, ``saturated``, ``tap_dropped``,
``tap_errors``) and an EWMA of the plugin's own run time (µs, from its start on the worker, so
queueing does not count) feed the Prometheus collector and the sync-wait choice. Deadlines are
judged on the hook's own CPU time (``busbar.hooks.fire``).

Source: docs/plugins.md#the-abi, docs/hooks.md#management-messages, docs/hooks.md#fail-safety (typed facade).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from busbar_sdk.settings_schema import cel_faults, header_faults, header_names
from busbar_sdk.wire import INLINE_CAPABILITY

from busbar import __version__ as BUSBAR_VERSION
from busbar.hooks import mgmt
from busbar.hooks.reply import Abstain, Arms, Reject, Rewrite, read_decide, read_transform
from busbar.hooks.taps import TapQueue
from busbar.hooks.workers import Job, WorkerPool

log = logging.getLogger("busbar.hooks")

MGMT_TIMEOUT_S = 5.0
#: A hook whose run-time EWMA is below this is waited for synchronously (see ``workers``) ...
SYNC_CUTOFF_US = 150.0
#: ... once it has answered this many calls (an unknown hook is waited for asynchronously).
SYNC_MIN_SAMPLES = 8

__all__ = ["INLINE_ATTRIBUTE", "MGMT_TIMEOUT_S", "HookFacade", "declares_inline"]

#: Set to True on a plugin's ``busbar_call`` implementation to declare it CPU-only and bounded
#: (the wire contract's capability name, ``busbar_sdk.hookspec.busbar_inline``).
INLINE_ATTRIBUTE = INLINE_CAPABILITY
#: Inline calls past their deadline before a declaring hook is moved to its worker pool.
INLINE_STRIKES = 3


def declares_inline(instance: Any) -> bool:
    """Does the plugin behind ``instance`` declare ``busbar_call.busbar_inline = True``?

    Looked up on the resolved implementation (``instance.plugin.binding.call``; for a bound method,
    its function) or, for an object that is not a loaded plugin, on ``instance`` itself.
    """
    plugin = getattr(instance, "plugin", None)
    binding = getattr(plugin, "binding", None)
    fn = getattr(binding, "call", None)
    for obj in (fn, getattr(fn, "__func__", None), instance):
        if obj is not None and getattr(obj, INLINE_ATTRIBUTE, False) is True:
            return True
    return False


class HookFacade:
    """One hook instance as the kernel sees it.

    Attributes:
        name: the instance name (the ref's ``module``), used in headers, metrics and logs.
        prompt, user: the effective grant (manifest ``needs`` ∩ the operator's ref).
        settings: the settings it was opened with; ``settings_version`` the desired version.
        schema: the plugin's manifest settings schema (``None`` without one).
        headers: the request headers it is projected (lower-cased names; ``()``: no ``headers``
            field), the union of its settings' ``x-busbar-headers`` lists; follows acked
            ``configure`` pushes.
        boot_settings: the settings it was opened with (its shared-state namespace is derived
            from them: ``busbar.store.shared.namespace_of``).
        state: the shared state handed to it (``busbar.store.shared.bind_hooks``), or ``None``.
    """

    def __init__(self, name: str, instance: Any, *, prompt: str, user: str, settings: dict[str, Any],
                 max_workers: int = 8, max_pending: int = 64, tap_capacity: int = 1024,
                 schema: str | dict[str, Any] | None = None):
        self.name = name
        self.instance = instance
        self.prompt = prompt
        self.user = user
        self.schema = schema
        self.headers: tuple[str, ...] = header_names(schema, settings)
        self.settings = dict(settings)
        self.boot_settings = dict(settings)
        self.state: Any = None
        self.settings_version = 1
        self.acked_version: int | None = None
        self._call: Callable[[dict[str, Any]], Any] = instance.call
        self._acall: Callable[[dict[str, Any]], Awaitable[Any]] | None = getattr(instance, "acall", None)
        self.inline = self._acall is None and declares_inline(instance)
        self.overruns = 0
        self._pool = WorkerPool(name, max_workers=max_workers, max_pending=max_pending)
        self._taps: TapQueue | None = None
        self._tap_capacity = tap_capacity
        self.latency_us = 0.0
        self.samples = 0
        self.calls = self.timeouts = self.errors = self.garbage = self.saturated = 0
        #: Shadow gates' verdicts by arm (``busbar.hooks.shadow``), never applied.
        self.shadow_verdicts: dict[str, int] = {}
        #: Set to a dict by a dry run (``busbar route --dry-run``): each ``decide`` reply's ``explain``
        #: object (what a router says about its decision; ignored by the request path), by request_id.
        self.explained: dict[str, Any] | None = None
        #: The plugin's manifest declares ``x-busbar-status-metrics``: its ``status`` metrics are
        #: exported on ``/metrics`` (``busbar.hooks.metrics``).
        self.exports_status = False

    # ------------------------------------------------------------------ request path

    @property
    def on_loop(self) -> bool:
        """Request-path calls run as tasks on the event loop (the plugin has an async twin)."""
        return self._acall is not None

    def decide(self, payload: dict[str, Any], known_idx: frozenset[int]) -> Job | None:
        """Queue a ``decide``; the job's result is ``Abstain | Reject | Arms`` (or it raised)."""
        acall = self._acall
        if acall is not None:
            self.calls += 1

            async def run_async() -> Abstain | Reject | Arms:
                return read_decide(await acall(payload), known_idx, self.prompt)
            return Job.on_loop(run_async)
        if self.inline:                 # declared CPU-only and bounded: run here, no thread hand-off
            self.calls += 1
            return Job.now(self.decide_now, payload, known_idx)
        return self._submit(lambda: self.decide_now(payload, known_idx))

    async def decide_awaited(self, payload: dict[str, Any], known_idx: frozenset[int], budget_s: float,
                             hard_s: float) -> Job:
        """A ``decide`` on a hook with an async twin (:attr:`on_loop`), awaited here (no task) and
        cut when its own CPU time passes ``budget_s`` or at ``hard_s`` of wall clock: the job,
        finished unless a cut ended it."""
        acall = self._acall
        assert acall is not None
        self.calls += 1
        return await Job.awaited(acall(payload), budget_s, hard_s, read_decide, known_idx, self.prompt)

    def decide_now(self, payload: dict[str, Any], known_idx: frozenset[int]) -> Abstain | Reject | Arms:
        """Call the plugin's ``decide`` on this thread and normalize its reply (``read_decide``;
        raises ``ReplyError`` for garbage, or what the plugin seam raised); the reply's ``explain``
        object, when any, is kept on the arm (and for a dry run, in :attr:`explained`). Unmetered:
        callers run it under a deadline (a worker's job, ``workers.run_inline``)."""
        raw = self._call(payload)
        arm = read_decide(raw, known_idx, self.prompt)
        if type(raw) is dict and "explain" in raw and isinstance(raw["explain"], dict):
            note: dict[str, Any] = raw["explain"]
            explained = self.explained
            if explained is not None:
                explained[str(payload["request"]["request_id"])] = note
            if isinstance(arm, Arms):
                arm.note = note
            elif isinstance(arm, Abstain):
                arm = Abstain(note)
        return arm

    def transform(self, payload: dict[str, Any], max_bytes: int) -> Job | None:
        """Queue a ``transform``; the job's result is ``Abstain | Reject | Rewrite``."""
        call, grant, acall = self._call, self.prompt, self._acall
        if acall is not None:
            self.calls += 1

            async def run_async() -> Abstain | Reject | Rewrite:
                return read_transform(await acall(payload), grant, max_bytes)
            return Job.on_loop(run_async)

        def run() -> Abstain | Reject | Rewrite:
            return read_transform(call(payload), grant, max_bytes)
        return self._submit(run)

    def _submit(self, fn: Callable[[], Any]) -> Job | None:
        self.calls += 1
        if self.inline:                 # declared CPU-only and bounded: run here, no thread hand-off
            return Job.now(fn)
        job = self._pool.submit(fn)
        if job is None:
            self.saturated += 1
        return job

    def overran(self, deadline_ms: int, cpu_ms: float, took_ms: float) -> None:
        """An inline call overran its deadline (``cpu_ms`` of its own CPU time, ``took_ms`` of wall
        clock): its reply is discarded (a timeout), and after ``INLINE_STRIKES`` of them (one could
        be the machine stalling, not the plugin) the hook runs on its worker pool for good, where a
        deadline can cut it."""
        if not self.inline:
            return
        self.overruns += 1
        if self.overruns >= INLINE_STRIKES:
            self.inline = False
            log.warning("hook '%s' declares busbar_inline but %d inline calls overran their deadline (the last "
                        "used %.1f ms of CPU in %.1f ms, timeout_ms %d); it runs on worker threads from now on",
                        self.name, self.overruns, cpu_ms, took_ms, deadline_ms)
        else:
            log.warning("hook '%s': an inline call used %.1f ms of CPU in %.1f ms (timeout_ms %d); its reply was "
                        "discarded", self.name, cpu_ms, took_ms, deadline_ms)

    @property
    def sync_ok(self) -> bool:
        """Wait for this hook synchronously: it has a track record (``SYNC_MIN_SAMPLES`` calls),
        its own run time is a lock hand-off's order, and no other call of it is in flight."""
        return (self._acall is None and self.samples >= SYNC_MIN_SAMPLES and self.latency_us < SYNC_CUTOFF_US
                and self._pool.busy <= 1)

    def observe(self, micros: float) -> None:
        """Fold one call's run time (µs, measured on the worker; a timeout counts its deadline)
        into the EWMA."""
        self.latency_us = micros if self.samples == 0 else 0.8 * self.latency_us + 0.2 * micros
        self.samples += 1

    def sync_missed(self) -> None:
        """A synchronous wait ran out: wait asynchronously until fast calls bring the EWMA down."""
        self.latency_us = max(self.latency_us, 2 * SYNC_CUTOFF_US)

    def notify(self, payload: dict[str, Any]) -> bool:
        """Offer a tap observation; False when dropped (queue full). Never blocks."""
        taps = self._taps
        if taps is None:
            taps = self._taps = TapQueue(self.name, self._call, capacity=self._tap_capacity)
        return taps.offer(payload)

    @property
    def tap_dropped(self) -> int:
        return self._taps.dropped if self._taps is not None else 0

    @property
    def tap_errors(self) -> int:
        return self._taps.errors if self._taps is not None else 0

    # ------------------------------------------------------------------ management

    def _mgmt(self, payload: dict[str, Any], timeout_s: float) -> Any:
        """Run one management message on its own thread; raises ``TimeoutError`` past the deadline."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["reply"] = self._call(payload)
            except BaseException as e:  # noqa: BLE001 - plugin code: reported to the caller below
                box["error"] = e
            done.set()
        threading.Thread(target=run, name=f"busbar-hook-mgmt-{self.name}", daemon=True).start()
        if not done.wait(timeout_s):
            raise TimeoutError(f"hook '{self.name}': no reply within {timeout_s:g} s")
        if "error" in box:
            raise box["error"]
        return box.get("reply")

    def configure(self, settings: dict[str, Any] | None = None, settings_version: int | None = None, *,
                  timeout_s: float = MGMT_TIMEOUT_S) -> bool:
        """Push ``settings`` (default: the current ones) as ``settings_version`` (default: the
        current desired version); True only when the hook acks that exact version, and only then
        do the desired settings/version change. Never raises."""
        new = self.settings if settings is None else dict(settings)
        version = self.settings_version if settings_version is None else settings_version
        msg = {"configure": {"hook": self.name, "settings": new, "settings_version": version,
                             "busbar_version": BUSBAR_VERSION}}
        try:
            reply = self._mgmt(msg, timeout_s)
        except BaseException as e:  # noqa: BLE001 - plugin code or deadline: no ack
            log.warning("hook '%s': configure (settings_version %d) failed: %s", self.name, version, e)
            return False
        if not mgmt.is_ack(reply, version):
            log.warning("hook '%s': configure (settings_version %d) was not acknowledged exactly (reply %s)",
                        self.name, version, mgmt.brief(reply))
            return False
        self.settings, self.settings_version, self.acked_version = new, version, version
        self.headers = header_names(self.schema, new)
        return True

    def settings_faults(self, settings: dict[str, Any]) -> list[str]:
        """What the kernel refuses in ``settings`` before pushing them (one line each, naming the
        key under ``settings.``): header allowlist entries that cannot be projected,
        ``x-busbar-cel`` expressions that do not compile or read an unlisted header, then what
        breaks the plugin's settings schema (``busbar.config.plugin_settings``) at other keys."""
        from busbar.config.plugin_settings import with_schema_faults

        first = [(f"settings.{where}", text)
                 for where, text in header_faults(self.schema, settings) + cel_faults(self.schema, settings)]
        return [f"{at}: {text}" for at, text in with_schema_faults(first, self.schema, settings, self.name,
                                                                   prefix="settings")]

    def describe(self, *, timeout_s: float = MGMT_TIMEOUT_S) -> dict[str, Any] | None:
        """The hook's settings JSON Schema, or ``None`` (unsupported, failed, or malformed)."""
        try:
            reply = self._mgmt({"describe": True}, timeout_s)
        except BaseException as e:  # noqa: BLE001 - plugin code or deadline
            log.info("hook '%s': describe failed: %s", self.name, e)
            return None
        return mgmt.read_describe(reply)

    def status(self, *, timeout_s: float = MGMT_TIMEOUT_S) -> mgmt.StatusReport | None:
        """The hook's reported state with bounded, sanitized metrics, or ``None`` (unsupported)."""
        try:
            reply = self._mgmt({"status": True}, timeout_s)
        except BaseException as e:  # noqa: BLE001 - plugin code or deadline
            log.info("hook '%s': status failed: %s", self.name, e)
            return None
        return mgmt.read_status(reply, desired_version=self.settings_version)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Stop the workers and tap queue, then ``busbar_close`` the instance (errors logged)."""
        self._pool.close()
        if self._taps is not None:
            self._taps.close()
        close = getattr(self.instance, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # plugin code: a broken close never blocks shutdown
                log.exception("hook '%s': close raised", self.name)

    def __repr__(self) -> str:
        return f"HookFacade({self.name!r}, prompt={self.prompt!r}, user={self.user!r})"
