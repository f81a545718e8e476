"""The frozen result of a load: the plugin set, its plugins, their instances, the inventory rows.

A :class:`PluginSet` never changes after it is built; a hot reload builds a new one and swaps
the reference whole (:mod:`busbar.loader.reload`). :class:`PluginInstance` is the hot path:
``instance.call(payload)`` is one direct call of the plugin's ``busbar_call`` implementation
plus the grant filter and the error mapping, nothing else.

Source: docs/plugins.md#grants, docs/plugins.md#the-abi
(registry frozen after boot, a reload swaps a new one in whole).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from busbar_sdk.artifact import Manifest, PluginBinding
from busbar_sdk.wire import ACALL_CAPABILITY

from busbar.loader.errors import PluginCallError, PluginError, PluginOpenError
from busbar.loader.unpack import Staging

__all__ = ["ASYNC_ATTRIBUTE", "Grant", "LoadedPlugin", "PluginInstance", "PluginSet", "Record", "effective_grant"]

log = logging.getLogger("busbar.plugins")
trace_log = logging.getLogger("busbar.plugins.trace")

_LADDER = {"no": 0, "ro": 1, "rw": 2}
_PROMPT_KEYS = ("system", "messages")
_USER_KEYS = ("user",)
#: A plugin may carry an async twin of its ``busbar_call`` as this attribute of the implementation
#: (the wire contract's capability name, ``busbar_sdk.hookspec.busbar_acall``).
ASYNC_ATTRIBUTE = ACALL_CAPABILITY


class Grant(NamedTuple):
    """What an instance may see: ``prompt`` in ``no < ro < rw``, ``user`` in ``no < ro``."""

    prompt: str = "no"
    user: str = "no"


def effective_grant(needs_prompt: str, needs_user: str, prompt: str, user: str) -> Grant:
    """The intersection of the manifest's ``needs`` and the operator's instance grant.

    Raises:
        ValueError: a level outside the ladder.
    """
    for level in (needs_prompt, needs_user, prompt, user):
        if level not in _LADDER:
            raise ValueError(f"grant level {level!r} is not one of no, ro, rw")
    p = min(needs_prompt, prompt, key=_LADDER.__getitem__)
    u = min(needs_user, user, key=_LADDER.__getitem__)
    return Grant(p, "ro" if u == "rw" else u)


@dataclass(frozen=True)
class Record:
    """One tarball as ``--list-plugins`` reports it.

    Attributes:
        file: the path as messages show it (``plugins/acme-1.2.0.tar.gz``).
        manifest: the parsed manifest, when it parsed.
        signature: the trust verdict label (see :class:`busbar.loader.verify.Verdict`), ``-``
            when the artifact is invalid.
        status: ``ready`` (would load), ``loaded``, ``SKIPPED``, ``INVALID`` or ``REJECTED``.
        reason: the one-line reason (empty for ``ready``/``loaded`` without an opt-in).
    """

    file: str
    manifest: Manifest | None
    signature: str
    status: str
    reason: str = ""

    def with_status(self, status: str, reason: str) -> Record:
        return Record(self.file, self.manifest, self.signature, status, reason)


class PluginInstance:
    """One opened instance (``busbar_open`` handle) of a plugin.

    ``call(payload) -> dict`` sends one message through ``busbar_call``. Before the call it drops
    ``request.system``/``request.messages`` unless the effective ``prompt`` grant is ``ro``/``rw``
    and ``request.user`` unless ``user`` is ``ro`` (hooks only); after it, a non-dict reply or a
    ``rewrite`` arm without ``prompt: rw`` raises. Every failure raises :class:`PluginCallError`
    (plugin exceptions chained). Thread-safe as far as the plugin is.

    ``acall``: ``None``, or, for a plugin whose ``busbar_call`` implementation carries an async twin
    (``busbar_call.busbar_acall = async def (handle, payload) -> dict``), ``await acall(payload)``
    with the same grant filter and checks, run on the caller's event loop (a cancellation, e.g. a
    deadline, propagates as ``CancelledError``).

    Attributes:
        plugin: the :class:`LoadedPlugin`.
        grant: the effective :class:`Grant`.
        handle: the plugin's opaque handle.
    """

    __slots__ = ("_closed", "acall", "call", "grant", "handle", "plugin")

    def __init__(self, plugin: LoadedPlugin, handle: object, grant: Grant) -> None:
        self.plugin, self.handle, self.grant = plugin, handle, grant
        self._closed = False
        self.call: Callable[[dict[str, Any]], dict[str, Any]] = _make_call(plugin, handle, grant)
        self.acall: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = _make_acall(plugin, handle, grant)

    def release(self, obj: object) -> None:
        """``busbar_free(handle, obj)``: tell the plugin a reply is no longer used (errors logged)."""
        assert self.plugin.binding is not None
        try:
            self.plugin.binding.free(self.handle, obj)
        except Exception:  # plugin code: a broken free never fails the caller
            log.exception("%s: busbar_free raised", self.plugin.file)

    def close(self) -> None:
        """``busbar_close(handle)`` once; later calls are no-ops (errors logged, never raised)."""
        if self._closed:
            return
        self._closed = True
        assert self.plugin.binding is not None
        try:
            self.plugin.binding.close(self.handle)
        except Exception:  # plugin code: a broken close never blocks shutdown
            log.exception("%s: busbar_close raised", self.plugin.file)

    def __repr__(self) -> str:
        return f"PluginInstance({self.plugin.name!r}, grant={tuple(self.grant)})"


class _Seam:
    """The grant checks at the plugin seam, shared by the sync and the async call: ``inbound``
    drops what the grant does not allow (hooks), ``outbound`` refuses a non-dict reply or a
    ``rewrite`` arm without ``prompt: rw``. Both raise :class:`PluginCallError`."""

    __slots__ = ("grant", "label", "may_rewrite", "strip")

    def __init__(self, plugin: LoadedPlugin, grant: Grant) -> None:
        self.label = plugin.file
        self.grant = grant
        self.strip: tuple[str, ...] = ()
        if plugin.kind == "hook":
            self.strip = (() if grant.prompt != "no" else _PROMPT_KEYS) + (() if grant.user != "no" else _USER_KEYS)
        self.may_rewrite = plugin.kind != "hook" or grant.prompt == "rw"

    def inbound(self, payload: dict[str, Any]) -> dict[str, Any]:
        strip = self.strip
        if strip:
            req = payload.get("request")
            if type(req) is dict:
                for key in strip:
                    if key in req:
                        return {**payload, "request": {k: v for k, v in req.items() if k not in strip}}
        return payload

    def outbound(self, reply: Any) -> dict[str, Any]:
        if type(reply) is not dict:
            raise PluginCallError(f"{self.label}: busbar_call returned {type(reply).__name__}, not a dict")
        if not self.may_rewrite and "rewrite" in reply:
            raise PluginCallError(f"{self.label}: replied with a rewrite arm but the instance's effective prompt "
                                  f"grant is {self.grant.prompt!r}; rewrite needs prompt: rw in both the manifest "
                                  f"needs and the instance")
        return reply


def _make_call(plugin: LoadedPlugin, handle: object, grant: Grant) -> Callable[[dict[str, Any]], dict[str, Any]]:
    assert plugin.binding is not None
    fn = plugin.binding.call
    seam = _Seam(plugin, grant)
    label = seam.label
    strip, may_rewrite = seam.strip, seam.may_rewrite

    def call(payload: dict[str, Any]) -> dict[str, Any]:
        if strip:                       # inbound() only when a key it strips is there (no call otherwise)
            req = payload.get("request")
            if type(req) is dict:
                for key in strip:
                    if key in req:
                        payload = seam.inbound(payload)
                        break
        try:
            reply = fn(handle, payload)
        except Exception as exc:  # plugin code: mapped to our error at the seam
            raise PluginCallError(f"{label}: busbar_call raised {type(exc).__name__}: {exc}") from exc
        if type(reply) is dict and (may_rewrite or "rewrite" not in reply):
            return reply                # what outbound() passes, checked here without the call
        return seam.outbound(reply)

    if os.environ.get("BUSBAR_TRACE_PLUGINS"):
        return _traced(call, plugin.name)
    return call


def _make_acall(plugin: LoadedPlugin, handle: object,
                grant: Grant) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None:
    """The async twin of ``busbar_call`` when the plugin declares one (``busbar_call.busbar_acall``,
    an ``async def (handle, payload) -> dict``), with the same seam; else ``None``."""
    assert plugin.binding is not None
    fn = getattr(plugin.binding.call, ASYNC_ATTRIBUTE, None)
    if fn is None or not inspect.iscoroutinefunction(fn):
        return None
    seam = _Seam(plugin, grant)
    label = seam.label

    async def acall(payload: dict[str, Any]) -> dict[str, Any]:
        payload = seam.inbound(payload)
        try:
            reply = await fn(handle, payload)
        except asyncio.CancelledError:
            raise                   # the caller's deadline: not the plugin's error
        except Exception as exc:  # plugin code: mapped to our error at the seam
            raise PluginCallError(f"{label}: busbar_acall raised {type(exc).__name__}: {exc}") from exc
        return seam.outbound(reply)
    return acall


def _redact(obj: Any, key: str = "") -> Any:
    if key in ("system", "text", "content", "credential", "value", "value_b64", "user") and obj is not None:
        return f"<redacted {len(obj) if isinstance(obj, (str, list, dict)) else 1}>"
    if isinstance(obj, dict):
        return {k: _redact(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_redact(v) for v in obj]
    return obj


def _traced(call: Callable[[dict[str, Any]], dict[str, Any]], name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def traced(payload: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = call(payload)
        except PluginCallError as exc:
            trace_log.debug("%s <- %s !! %s", name, _redact(payload), exc)
            raise
        trace_log.debug("%s <- %s -> %s", name, _redact(payload), _redact(reply))
        return reply
    return traced


class LoadedPlugin:
    """A plugin that passed every check; imported unless the set was built for validation only.

    Attributes:
        file: the tarball as messages show it.
        manifest: the signed :class:`Manifest`; ``name``, ``alias``, ``kind`` mirror it.
        verdict: the trust verdict label (``first-party``, ``trusted``, ``... (allowed)``).
        binding: the resolved ABI (``None`` when not imported).
        directory: where its wheel was unpacked (``None`` when not imported).
        identity: SHA-256 of the tarball bytes (a reload reuses an identical plugin as is).
    """

    __slots__ = (
        "alias",
        "binding",
        "directory",
        "file",
        "identity",
        "kind",
        "manifest",
        "name",
        "owner",
        "verdict",
    )

    def __init__(self, file: str, manifest: Manifest, verdict: str, identity: str, *,
                 binding: PluginBinding | None = None, directory: Path | None = None, owner: str = "") -> None:
        self.file, self.manifest, self.verdict, self.identity = file, manifest, verdict, identity
        self.name, self.alias, self.kind = manifest.name, manifest.alias, manifest.kind
        self.binding, self.directory, self.owner = binding, directory, owner

    @property
    def imported(self) -> bool:
        return self.binding is not None

    def grant(self, prompt: str = "no", user: str = "no") -> Grant:
        """The effective grant for an instance the operator configured with ``prompt``/``user``."""
        needs = self.manifest.needs
        return effective_grant(needs.prompt, needs.user, prompt, user)

    def open(self, settings: Mapping[str, Any] | None = None, *, prompt: str = "no",
             user: str = "no") -> PluginInstance:
        """``busbar_open(settings)``: create an instance.

        Args:
            settings: the instance's settings (secret references already resolved); ``{}`` if None.
            prompt, user: the operator's instance grant (hooks); intersected with ``needs``.

        Raises:
            PluginOpenError: not imported (validation-only set), or ``busbar_open`` raised or
                returned ``None``.
        """
        if self.binding is None:
            raise PluginOpenError(f"{self.file}: {self.name} was validated but not imported (import_code=False)")
        grant = self.grant(prompt, user)
        try:
            handle = self.binding.open(dict(settings or {}))
        except Exception as exc:  # plugin code: mapped to our error at the seam
            raise PluginOpenError(f"{self.file}: busbar_open raised {type(exc).__name__}: {exc}") from exc
        if handle is None:
            raise PluginOpenError(f"{self.file}: busbar_open returned None; return a handle object")
        return PluginInstance(self, handle, grant)

    def __repr__(self) -> str:
        return f"LoadedPlugin({self.name!r}, alias={self.alias!r}, kind={self.kind!r}, {self.manifest.version})"


@dataclass(frozen=True)
class PluginSet:
    """The frozen set of loadable plugins plus the inventory of every tarball seen.

    Attributes:
        enabled: ``plugins.enabled`` at build time (``False`` = nothing was discovered).
        plugins: the loadable plugins, in file order.
        records: one :class:`Record` per tarball, in file order.
        imported: whether plugin code was imported (``False`` for ``--validate``).
        staging: where the imported plugins were unpacked.
    """

    enabled: bool = False
    plugins: tuple[LoadedPlugin, ...] = ()
    records: tuple[Record, ...] = ()
    imported: bool = False
    staging: Staging | None = field(default=None, repr=False)
    _index: Mapping[str, LoadedPlugin] = field(default_factory=lambda: MappingProxyType({}), repr=False)

    @classmethod
    def build(cls, *, enabled: bool, plugins: tuple[LoadedPlugin, ...], records: tuple[Record, ...],
              imported: bool, staging: Staging | None = None) -> PluginSet:
        index: dict[str, LoadedPlugin] = {}
        for p in plugins:
            for key in (p.name, p.alias):
                if index.setdefault(key, p) is not p:
                    raise PluginError(f"internal: {key!r} indexed twice")  # conflicts are refused earlier
        return cls(enabled, plugins, records, imported, staging, MappingProxyType(index))

    def get(self, name_or_alias: str) -> LoadedPlugin | None:
        """The plugin whose manifest ``name`` or ``alias`` is ``name_or_alias``."""
        return self._index.get(name_or_alias)

    def of_kind(self, kind: str) -> tuple[LoadedPlugin, ...]:
        return tuple(p for p in self.plugins if p.kind == kind)

    def skipped(self) -> tuple[Record, ...]:
        """Records of plugins skipped by the trust policy."""
        return tuple(r for r in self.records if r.status == "SKIPPED")

    def __iter__(self) -> Iterator[LoadedPlugin]:
        return iter(self.plugins)

    def __len__(self) -> int:
        return len(self.plugins)

    def __contains__(self, name_or_alias: object) -> bool:
        return isinstance(name_or_alias, str) and name_or_alias in self._index
