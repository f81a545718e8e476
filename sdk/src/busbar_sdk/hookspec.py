"""The plugin ABI: six pluggy hookspecs, project ``busbar``, one per entry point of the ABI
(docs/plugins.md#the-abi), and one optional hook for hook plugins, :func:`busbar_bind_state`.

Every plugin (hook, store, secret, auth) implements the same six kind-neutral hooks; what differs
per kind is the JSON payload vocabulary carried by :func:`busbar_call`. A plugin may implement
them with the sdk's base classes (:func:`busbar_sdk.export_plugin`) or with plain pluggy markers
and no sdk at all::

    import pluggy

    hookimpl = pluggy.HookimplMarker("busbar")

    @hookimpl
    def busbar_abi() -> int:
        return 1

    @hookimpl
    def busbar_plugin_kind() -> str:
        return "hook"

    @hookimpl
    def busbar_open(settings: dict) -> object:
        return dict(settings)

    @hookimpl
    def busbar_call(handle: object, payload: dict) -> dict:
        if payload.get("op") == "decide":
            return {"order": [c["idx"] for c in reversed(payload["candidates"])]}
        return {}

and registers the module through the entry point group ``busbar.plugins`` in its
``pyproject.toml``: ``[project.entry-points."busbar.plugins"] my-hook = "my_hook"``.

Each loaded plugin gets its own ``pluggy.PluginManager``, so every hook has exactly one
implementation and every hook is ``firstresult``. The kernel resolves the implementations once at
load (``PluginManager.check_pending()`` runs first, so a misspelled ``busbar_*`` hookimpl fails at
boot) and calls them directly on the hot path through a typed facade
(:class:`busbar_sdk.PluginBinding`), never ``pm.hook.<name>`` by string.

Payloads and replies are JSON-compatible ``dict`` objects (str keys; str, int, float, bool,
None, list, dict values), byte-for-byte the messages of the sidecar wire, so one plugin's logic
serves both transports. Optional fields are *absent*, never ``null``. Their names and limits are
:mod:`busbar_sdk.wire`.

Two optional *capabilities* are attributes of the ``busbar_call`` implementation, not hooks:
:func:`busbar_inline` (``busbar_call.busbar_inline = True``: run on the event loop) and
:func:`busbar_acall` (``busbar_call.busbar_acall = async def ...``: an async twin). They are
declared below with the same contract sections as the hooks (``CAPABILITY_NAMES``).

Source: docs/plugins.md#the-abi, docs/hooks.md#what-a-hook-receives, docs/hooks.md#management-messages.
Added in 1.5.0 (transport version 1).
"""
from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import pluggy

from busbar_sdk._versions import PROJECT_NAME
from busbar_sdk.wire import ACALL_CAPABILITY, INLINE_CAPABILITY

if TYPE_CHECKING:
    from busbar_sdk.shared_state import SharedState

__all__ = [
    "CAPABILITY_NAMES",
    "HOOK_NAMES",
    "REQUIRED_HOOKS",
    "busbar_abi",
    "busbar_acall",
    "busbar_bind_state",
    "busbar_call",
    "busbar_close",
    "busbar_free",
    "busbar_inline",
    "busbar_open",
    "busbar_plugin_kind",
    "hookimpl",
    "hookspec",
]

#: Marker for the specifications below (project name ``busbar``).
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
#: Marker plugin implementations use; ``pluggy.HookimplMarker("busbar")`` is the same marker.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: Every ABI hook, in lifecycle order (``busbar_bind_state``: optional, hook plugins only).
HOOK_NAMES = ("busbar_abi", "busbar_plugin_kind", "busbar_open", "busbar_bind_state", "busbar_call", "busbar_free",
              "busbar_close")
#: Hooks a plugin must implement; ``busbar_free`` and ``busbar_close`` default to no-ops.
REQUIRED_HOOKS = ("busbar_abi", "busbar_plugin_kind", "busbar_open", "busbar_call")
#: Optional capabilities: attributes of a plugin's ``busbar_call`` implementation, not pluggy hooks
#: (they are declared below for their contract and are not on the hook relay).
CAPABILITY_NAMES = (INLINE_CAPABILITY, ACALL_CAPABILITY)


# ---------------------------------------------------------------------------------------------
# Boot: identity and transport, called once per load (boot, hot reload, --validate never).
# ---------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def busbar_abi() -> int:
    """Report the transport version this plugin was written against.

    When: once, right after the plugin's entry point is imported, at boot or on a hot reload
    (``SIGHUP``); never on the request path and never by ``busbar --validate`` or
    ``--list-plugins`` (they import nothing). Synchronous.

    Returns:
        ``1`` (``busbar_sdk.TRANSPORT_VERSION``): the frozen signature contract of these six hooks.
        This is *not* the manifest's ``abi_version`` (the per-kind payload version).

    On error: an exception, a non-``int`` or any value other than the kernel's transport version
    aborts the boot naming the file (on a reload: the reload fails and the running set stays).

    Grants: none. Source: docs/plugins.md#the-abi (TRANSPORT_VERSION = 1).
    Added: 1.5.0.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def busbar_plugin_kind() -> str:
    """Report which kind of plugin this is.

    When: once per load, after :func:`busbar_abi`. Synchronous.

    Returns:
        ``"hook"``, ``"store"``, ``"secret"`` or ``"auth"``. The kernel cross-checks it against
        the signed manifest's ``kind``; a mismatch aborts the boot with
        ``kind mismatch: the manifest says 'hook' but the plugin reports 'store'``.

    On error: an exception or a non-``str`` aborts the boot naming the file.

    Grants: none. Source: docs/plugins.md#the-abi (kind cross-checked at load).
    Added: 1.5.0.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def busbar_open(settings: dict[str, Any]) -> object:
    """Create one instance (a *handle*) of the plugin with its operator settings.

    When: once per configured instance, at boot and whenever the kernel rebuilds that instance
    (hot reload, a settings change that requires a restart of the instance). A hook plugin
    referenced by three pools with different ``settings`` is opened three times. Synchronous;
    may do slow setup (connect, load a model): it is never on the request path.

    Args:
        settings: the instance's opaque ``settings:`` map from config.yaml, a JSON-compatible dict
            (``{}`` when omitted), with secret references already resolved to strings. The plugin
            owns its shape; validate it here and raise on nonsense. For a hook the same map is also
            pushed later by the ``configure`` management message.

    Returns:
        An opaque handle (any object, never ``None``) passed back to :func:`busbar_call`,
        :func:`busbar_free` and :func:`busbar_close`.

    On error: an exception is reported as ``PluginOpenError`` naming the plugin and the message;
    at boot it aborts the boot (fail-closed: an auth, store or secret module that cannot open
    never silently degrades).

    Grants: none. Source: docs/plugins.md#the-abi.
    Added: 1.5.0.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def busbar_bind_state(handle: object, state: SharedState) -> None:
    """Hand a hook instance its fleet-wide state: a :class:`busbar_sdk.shared_state.SharedState`.

    When: once per opened instance of an in-process ``kind: hook`` plugin that implements it, after
    :func:`busbar_open`, when the gateway's store is open and shared (any backend but ``memory``):
    at boot before the listener accepts, and for the instances a hot reload or a config apply opens.
    Never with the memory store, never by ``busbar route --dry-run`` / ``busbar hooks test`` (they
    do not open the store), never for sidecar hooks. It may be called before or after the
    ``configure`` push, and concurrently with ``busbar_call`` on other threads. Synchronous; must
    not block (keep the handle, do the I/O later from ``busbar_call``).

    Args:
        handle: the object :func:`busbar_open` returned.
        state: the instance's :class:`~busbar_sdk.shared_state.SharedState` (``version``
            :data:`~busbar_sdk.shared_state.SHARED_STATE_VERSION`), confined to its namespace.

    Returns:
        Nothing.

    On error: logged on ``busbar.hooks`` and ignored: the instance runs without shared state.
    Implement it with ``@hookimpl(optionalhook=True)``: a kernel older than this hook then loads
    the plugin and never calls it (the plugin keeps its in-process state).

    Grants: none (the state holds what the plugin put there; the kernel namespaces every name).
    Source: docs/plugins.md#shared-state. Added: 1.5.0 (shared state version 1).
    """
    raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# Per request: every operation rides this one hook.
# ---------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def busbar_call(handle: object, payload: dict[str, Any]) -> dict[str, Any]:
    """Handle one message and return its reply; the only hook on the request path.

    When: for a hook, once per request per attached gate (``decide``; all gates concurrently),
    per rewrite pass (``transform``), per observed stage (``notify``, taps), and on management
    traffic (``configure``/``describe``/``status``). For store, secret and auth plugins, once per
    operation of that subsystem. Synchronous and called from worker threads: it must be
    thread-safe and fast (a gate's default budget is ``timeout_ms: 1``); do slow work in
    ``busbar_open`` or in your own background threads.

    Args:
        handle: the object :func:`busbar_open` returned.
        payload: one JSON-compatible message. Hook messages (``busbar_sdk.models``; the sidecar
            wire's bytes exactly):

            * ``{"op": "decide", "request": RequestProjection, "candidates": [Candidate, ...],
              "context": {"budget_remaining"?: int, "budget"?: [BudgetEntry, ...]}}``: a gate's
              blocking decision. ``request`` carries ``request_id``, ``pool``,
              ``ingress_protocol``, ``message_count``, ``has_tools``, ``total_chars``,
              ``max_tokens``?, ``stream``; ``system``? and ``messages``? (``[{role, text}]``) only
              under the ``prompt: ro|rw`` grant; ``user``? (``{key_id, key_name, user}``) only
              under ``user: ro``. Each candidate: ``idx``, ``model``, ``provider``, ``weight``,
              ``context_max``?, ``tier``?, ``tags``?, ``cost_per_mtok``? (micro-units per token),
              ``latency_ms``? (EWMA), ``available_concurrency``?, ``budget_remaining``?,
              ``rate_headroom``? (fraction 0..1).
            * ``{"op": "transform", ...same members...}``: a rewrite pass (``prompt: rw``).
            * ``{"op": "notify", ..., "stage"?: {"at": "route"|"attempt"|"completion", "model"?,
              "attempt_number"?, "remaining_candidates"?, "previous_failure"?, "outcome"?,
              "status"?}}``: a tap observation; the reply is discarded.
            * ``{"configure": {"hook": str, "settings": dict, "settings_version": int,
              "busbar_version": str}}``, ``{"describe": true}``, ``{"status": true}``: management.

            Secret, store and auth payloads are documented in ``busbar_sdk.models`` (``{"op":
            "resolve", "settings": {...}, "deadline_ms": int}``; ``{"op": "authenticate",
            "credential": str}``; ``{"op": <store operation>, "args": {...}}``). Unknown fields must
            be ignored, unknown ops answered with ``{}`` (the wire is append-only).

    Returns:
        A JSON-compatible dict, the reply arm: ``{}`` or ``{"abstain": true}`` (abstain),
        ``{"reject": {"status": 400..499, "message": str}}``, ``{"restrict": {"tags_any": [str,
        ...]}}``, ``{"order": [idx, ...]}``, ``{"rewrite": {"messages": [{role, content}],
        "tools"?: [...]}}`` (needs ``prompt: rw``); for ``configure``: ``{"ack":
        {"settings_version": <the exact version sent>}}``; ``describe``: ``{"schema": <JSON
        Schema>}``; ``status``: ``{"status": {"settings_version", "settings", "metrics": [...]}}``.
        ``None`` is *not* an abstain: it is garbage.

    On error: an exception, a non-dict reply, or a ``rewrite`` arm without the ``prompt: rw``
    grant is raised to the caller as ``PluginCallError``; for a gate that means its ``on_error``
    (default ``nothing``: the gate drops out of the decision), a slow reply is cut off at
    ``timeout_ms``. A plugin can never fail a request on its own.

    Grants: the kernel projects ``system``/``messages`` only when ``min(manifest needs.prompt,
    instance prompt:)`` is ``ro`` or ``rw`` and ``user`` only when ``min(needs.user, user:)`` is
    ``ro``; it strips them from the payload otherwise, and refuses a ``rewrite`` reply unless the
    effective prompt grant is ``rw``.

    Source: docs/hooks.md#what-a-hook-receives, docs/hooks.md#what-a-gate-may-answer,
    docs/hooks.md#management-messages, docs/plugins.md#the-abi. Added: 1.5.0.
    """
    raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# Teardown and memory: symmetry with the C ABI.
# ---------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def busbar_free(handle: object, obj: object) -> None:
    """Release a reply object the kernel has finished with.

    When: only through ``PluginInstance.release(reply)``; the kernel's hot path does not call it,
    because Python replies are owned by the garbage collector. It exists so the six-symbol ABI is
    mirrored exactly; plugins that pool reply objects may recycle them here. Optional: the
    default is a no-op. Synchronous.

    Args:
        handle: the instance's handle.
        obj: a reply previously returned by :func:`busbar_call` on that handle.

    Returns:
        Nothing.

    On error: logged on ``busbar.plugins`` and ignored.

    Grants: none. Added: 1.5.0. Source: docs/plugins.md#the-abi.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def busbar_close(handle: object) -> None:
    """Close an instance: release connections, threads and files the handle owns.

    When: once per handle, when its owner retires it (shutdown, the instance rebuilt, or the
    plugin removed by a hot reload once its in-flight calls are done). No call on this handle
    follows. Optional: the default is a no-op. Synchronous.

    Args:
        handle: the instance's handle.

    Returns:
        Nothing.

    On error: logged on ``busbar.plugins`` and ignored (a broken close never blocks shutdown).

    Grants: none. Added: 1.5.0. Source: docs/plugins.md#the-abi.
    """
    raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# Capabilities: optional attributes of the ``busbar_call`` implementation (not pluggy hooks).
# ---------------------------------------------------------------------------------------------

def busbar_inline() -> bool:
    """Declare the plugin's ``busbar_call`` CPU-only and bounded, so it may run on the event loop.

    When: read once per instance when the kernel attaches a hook (boot, hot reload), as the
    attribute ``busbar_call.busbar_inline`` of the plugin's implementation (a function attribute,
    not a hook: ``busbar_call.busbar_inline = True``). When it is ``True``, decide and transform
    calls run right on the event loop instead of a worker thread (no thread hand-off); the
    ``busbar_sdk.sidecar`` server honours it the same way. Absent or any other value: worker thread.

    Returns:
        ``True`` to declare the capability (the attribute's value; only the ``bool`` ``True``
        counts).

    On error: a declaring hook that overruns its deadline still has its reply discarded; after 3
    such overruns the kernel logs a warning and moves that hook back to its worker pool. Never
    declare it on a ``busbar_call`` that does I/O or can block.

    Grants: unchanged; the payload is projected and stripped exactly as for :func:`busbar_call`.
    Source: docs/hooks.md#where-plugin-code-runs (``busbar_sdk.wire.INLINE_CAPABILITY``).
    Added: 1.5.0.
    """
    raise NotImplementedError


def busbar_acall(handle: object, payload: dict[str, Any]) -> Awaitable[dict[str, Any]]:
    """The async twin of :func:`busbar_call`, awaited on the kernel's event loop.

    When: declared as the attribute ``busbar_call.busbar_acall = <async def (handle, payload)>`` of
    the plugin's implementation; read once per instance at attach. The kernel then awaits it for
    ``decide`` and ``transform`` (no worker thread, cancellable at the gate's ``timeout_ms``); taps
    and management messages still go through the synchronous :func:`busbar_call`. For I/O-bound
    plugins (the first-party ``busbar-webrequest-hook`` awaits its sidecar through it).

    Args:
        handle: the object :func:`busbar_open` returned.
        payload: the same message :func:`busbar_call` would receive.

    Returns:
        An awaitable of the same reply dict :func:`busbar_call` returns (the reply arms of
        ``busbar_sdk.wire``).

    On error: an exception is raised to the caller as ``PluginCallError`` (the gate's
    ``on_error`` applies); a reply still pending at the deadline is cancelled.

    Grants: as :func:`busbar_call` (prompt and user fields stripped per the effective grant, a
    ``rewrite`` refused without ``prompt: rw``).
    Source: docs/hooks.md#where-plugin-code-runs (``busbar_sdk.wire.ACALL_CAPABILITY``).
    Added: 1.5.0.
    """
    raise NotImplementedError
