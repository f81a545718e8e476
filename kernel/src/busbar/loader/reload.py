"""Hot reload: rescan ``plugins.dir`` and swap the plugin set atomically, or keep the running one.

:class:`PluginReloader` owns the current :class:`PluginSet`. ``reload()`` builds a complete new
set beside the running one (identical tarballs reuse their imported code; a replaced plugin's
modules are detached and restored if anything fails), then replaces the reference in one
assignment: a request sees either the old set or the new one, never a mix. A failed reload logs
every fault on ``busbar.plugins`` and leaves the running set untouched. A retired set's modules
and directories are removed one reload later (or at :meth:`close`), so calls already in flight
on it finish normally.

A serving gateway's ``SIGHUP`` runs a whole config apply (``busbar.server.apply``), which calls
:meth:`reload_faults` with the new ``plugins:`` block before it rebuilds the gateway;
:meth:`install_sighup` wires ``SIGHUP`` to a plugin-only reload for embedders without the server.

Source: issue 4 (hot reload) (a reload swaps a new registry in whole).
"""
from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from busbar_sdk.artifact import DEFAULT_LIMITS, Limits

from busbar import __version__ as KERNEL_VERSION
from busbar.config.schema_plugins import PluginsConfig
from busbar.loader.errors import PluginBootError
from busbar.loader.pipeline import EMBEDDED, Admit, _Embedded, load_plugins, unload
from busbar.loader.registry import PluginSet
from busbar.loader.unpack import Staging, default_staging

__all__ = ["PluginReloader"]

log = logging.getLogger("busbar.plugins")

SwapCallback = Callable[[PluginSet, PluginSet], None]


class PluginReloader:
    """Holds the running plugin set and replaces it whole on :meth:`reload`.

    Args:
        cfg: the ``plugins:`` block.
        base_dir: where a relative ``plugins.dir`` resolves.
        on_swap: called as ``on_swap(old, new)`` after each successful swap (e.g. to reopen hook
            instances); its exceptions are logged, never undo the swap.
        release_key, kernel_version, staging, limits: as :func:`busbar.loader.load_plugins`.
    """

    def __init__(self, cfg: PluginsConfig, *, base_dir: Path, on_swap: SwapCallback | None = None,
                 release_key: bytes | _Embedded | None = EMBEDDED, kernel_version: str = KERNEL_VERSION,
                 staging: Staging | None = None, limits: Limits = DEFAULT_LIMITS) -> None:
        self.cfg, self.base_dir, self.on_swap = cfg, Path(base_dir), on_swap
        self._release_key, self._kernel_version, self._limits = release_key, kernel_version, limits
        self._staging = staging
        self._lock = threading.Lock()
        self._current = PluginSet.build(enabled=False, plugins=(), records=(), imported=True)
        self._retired: list[PluginSet] = []
        self._admit: Admit | None = None

    @property
    def current(self) -> PluginSet:
        """The running set (one attribute read: safe from any thread)."""
        return self._current

    def _load(self, cfg: PluginsConfig, previous: PluginSet | None,
              allow_downgrade: frozenset[str] = frozenset()) -> PluginSet:
        return load_plugins(cfg, base_dir=self.base_dir, release_key=self._release_key,
                            kernel_version=self._kernel_version, limits=self._limits,
                            staging=self._staging or default_staging(), previous=previous, admit=self._admit,
                            allow_downgrade=allow_downgrade)

    def start(self, admit: Admit | None = None, allow_downgrade: frozenset[str] = frozenset()) -> PluginSet:
        """The boot load. Raises :class:`PluginBootError` (the kernel refuses to start).

        Args:
            admit: the config's plugin-reference check (see :func:`busbar.loader.load_plugins`),
                run before anything is imported; kept for every later :meth:`reload`.
            allow_downgrade: names allowed below their version mark for this load only (a
                :meth:`reload` never allows a downgrade).
        """
        with self._lock:
            self._admit = admit
            self._current = self._load(self.cfg, None, allow_downgrade)
            return self._current

    def reload(self, cfg: PluginsConfig | None = None) -> bool:
        """Rescan and swap atomically; ``False`` (running set kept, reasons logged) on any fault.

        Args:
            cfg: a new ``plugins:`` block (a config reload), or ``None`` to keep the current one.
        """
        return not self.reload_faults(cfg)

    def reload_faults(self, cfg: PluginsConfig | None = None) -> list[str]:
        """:meth:`reload`, returning the faults instead: ``[]`` after a swap, else one line per fault
        (also logged on ``busbar.plugins``; the running set is kept). A config apply
        (``busbar.server.apply``) reports these lines to its caller."""
        with self._lock:
            use = cfg if cfg is not None else self.cfg
            try:
                new = self._load(use, self._current)
            except PluginBootError as exc:
                log.error("plugin reload failed; keeping the running set (%d plugins): %s", len(self._current),
                          "; ".join(exc.faults))
                return list(exc.faults)
            old, self._current, self.cfg = self._current, new, use
            for retired in self._retired:
                unload(retired, keep=(new, old))
            self._retired = [old]
        log.info("plugin reload: %d plugins now loaded (%s)", len(new), ", ".join(p.name for p in new) or "none")
        if self.on_swap is not None:
            try:
                self.on_swap(old, new)
            except Exception:  # the caller's code: a broken callback never undoes a swap
                log.exception("plugin reload: on_swap callback raised")
        return []

    def install_sighup(self) -> None:
        """Make ``SIGHUP`` run :meth:`reload` on a background thread (main thread only)."""
        def _on_sighup(signum: int, frame: FrameType | None) -> None:
            threading.Thread(target=self.reload, name="busbar-plugin-reload", daemon=True).start()
        signal.signal(signal.SIGHUP, _on_sighup)

    def close(self) -> None:
        """Retire everything (shutdown): forget plugin modules, delete unpacked directories."""
        with self._lock:
            for retired in self._retired:
                unload(retired, keep=self._current)
            unload(self._current)
            self._retired = []
            self._current = PluginSet.build(enabled=False, plugins=(), records=(), imported=True)
