"""Importing plugin code from its private directory without touching ``sys.path``.

A :class:`PluginImporter` is a meta-path finder that maps each loaded plugin's top-level module
names to that plugin's unpacked directory. It is appended to ``sys.meta_path`` (it never overrides
a module of the environment), refuses a top-level name the environment already provides (a plugin
may not shadow ``json`` or ``pydantic``), and records which modules each plugin owns so a hot
reload can detach them, import a new version, and either forget the old ones or put them back.

Source: docs/plugins.md (loading) (registry swapped whole on reload).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from busbar_sdk._errors import BindingError

__all__ = ["OwnedModules", "PluginImporter", "environment_provides"]


def environment_provides(name: str) -> str | None:
    """Where the kernel's environment already provides top-level module ``name``, or ``None``.

    Consults ``sys.modules``, built-ins and every meta-path finder except plugin importers.
    """
    if name in sys.modules:
        mod = sys.modules[name]
        if not getattr(mod, "__busbar_plugin__", False):
            return str(getattr(mod, "__file__", None) or "an already imported module")
    if name in sys.builtin_module_names:
        return "a built-in module"
    for finder in sys.meta_path:
        if isinstance(finder, PluginImporter):
            continue
        try:
            spec = finder.find_spec(name, None)
        except (ImportError, AttributeError, ValueError, TypeError):
            continue
        if spec is not None:
            return str(spec.origin or (list(spec.submodule_search_locations or []) or ["?"])[0])
    return None


@dataclass
class OwnedModules:
    """The top-level names, directory and module objects one plugin owns (undo state of a detach)."""

    root: Path
    names: tuple[str, ...]
    modules: dict[str, ModuleType] = field(default_factory=dict)


class PluginImporter(importlib.abc.MetaPathFinder):
    """Maps plugin top-level names to plugin directories; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._roots: dict[str, tuple[str, Path]] = {}
        self._owned: dict[str, OwnedModules] = {}

    # -- importlib protocol ---------------------------------------------------------------
    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if path is not None or "." in fullname:
            return None
        entry = self._roots.get(fullname)
        if entry is None:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [str(entry[1])])

    def install(self) -> None:
        """Append to ``sys.meta_path`` once."""
        with self._lock:
            if self not in sys.meta_path:
                sys.meta_path.append(self)

    # -- ownership ------------------------------------------------------------------------
    def owner_of(self, name: str) -> str | None:
        entry = self._roots.get(name)
        return entry[0] if entry else None

    def load(self, owner: str, root: Path, top_level: Iterable[str], module: str, attr: str) -> object:
        """Import ``module`` from ``root`` and return ``module.attr`` (a dotted attribute path).

        Raises:
            BindingError: a top-level name is claimed by another plugin or provided by the
                environment, or the import / attribute lookup failed (its exception attached).
        """
        names = tuple(top_level)
        with self._lock:
            for n in names:
                other = self.owner_of(n)
                if other is not None and other != owner:
                    raise BindingError(f"top-level module {n!r} is already provided by plugin {other.split('@')[0]!r}")
                where = environment_provides(n)
                if where is not None and other is None:
                    raise BindingError(f"top-level module {n!r} would shadow {where} of the kernel's "
                                       f"environment; rename the plugin's package")
            self.install()
            self._owned[owner] = OwnedModules(root, names)
            for n in names:
                self._roots[n] = (owner, root)
            try:
                obj: object = importlib.import_module(module)
                for part in filter(None, attr.split(".")):
                    obj = getattr(obj, part)
            except Exception as exc:  # plugin code: map to our error at the seam
                self.forget(owner)
                target = f"{module}:{attr}" if attr else module
                raise BindingError(f"importing {target} failed: {type(exc).__name__}: {exc}") from exc
            self._record(owner)
            return obj

    def _record(self, owner: str) -> None:
        owned = self._owned[owner]
        # dict.copy() takes the snapshot in one C call: a list() over the live items can be cut by a
        # garbage-collection finalizer (or another thread) importing a module mid-iteration.
        for mod_name, mod in sys.modules.copy().items():
            top = mod_name.split(".", 1)[0]
            if top in owned.names and mod is not None:
                owned.modules[mod_name] = mod
                try:
                    mod.__busbar_plugin__ = True  # type: ignore[attr-defined]
                except AttributeError:
                    pass

    def detach(self, owner: str) -> OwnedModules | None:
        """Remove ``owner``'s names and modules from the import system; returns them for undo."""
        with self._lock:
            owned = self._owned.pop(owner, None)
            if owned is None:
                return None
            self._record_into(owned)
            for n in owned.names:
                if self._roots.get(n, (None,))[0] == owner:
                    del self._roots[n]
            for mod_name in owned.modules:
                sys.modules.pop(mod_name, None)
            sys.path_importer_cache.pop(str(owned.root), None)
            return owned

    def _record_into(self, owned: OwnedModules) -> None:
        for mod_name, mod in list(sys.modules.items()):
            if mod_name.split(".", 1)[0] in owned.names and mod is not None:
                owned.modules.setdefault(mod_name, mod)

    def reattach(self, owner: str, owned: OwnedModules) -> None:
        """Undo :meth:`detach` (a failed reload puts the running plugin's modules back)."""
        with self._lock:
            self._owned[owner] = owned
            for n in owned.names:
                self._roots[n] = (owner, owned.root)
            sys.modules.update(owned.modules)

    def forget(self, owner: str) -> None:
        """Drop ``owner`` for good (its module objects live on only through references)."""
        self.detach(owner)
