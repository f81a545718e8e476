"""The manifest-only plugin catalog config validation asks: which names load, as what kind, and why not.

Built from the records of one scan of ``plugins.dir`` (structure + trust, nothing imported), so the
same answers serve ``busbar --validate`` and the boot, which checks every config reference to a plugin
(a pool's hook ``module:``, ``auth.chain``, ``store.module``, ``{ module: <secret-plugin> }``) against
it *before* it imports any plugin code (docs/plugins.md#what-aborts-the-boot).

``ManifestCatalog(records)``:

- ``kind_of(name) -> str | None``: the manifest ``kind`` of the loadable plugin whose name or alias is
  ``name``; ``None`` when no loadable plugin answers to it.
- ``name_of(name) -> str | None``: that plugin's manifest name (``None`` when none).
- ``names_of(name) -> set[str]``: that plugin's name and alias (empty when none).
- ``settings_schema_of(name) -> str | None``: the loadable plugin's signed manifest ``settings_schema``
  (the rules validation judges an instance's ``settings:`` by: required keys, egress URLs through the
  SSRF guard; docs/plugin-format.md), ``None`` when it has none.
- ``installed() -> dict[str, str]``: every plugin in ``plugins.dir`` whose manifest parsed, loadable
  or not, as manifest name -> alias (what a ``plugins.min_versions`` key may name).
- ``why_not(name) -> str | None``: for a plugin in ``plugins.dir`` that answers to ``name`` but will not
  load (skipped by the trust policy, below its floor, rejected), ``"<file> is SKIPPED: <reason>"``.
"""
from __future__ import annotations

from collections.abc import Iterable

from busbar.loader.registry import Record

__all__ = ["ManifestCatalog"]

_LOADABLE = ("ready", "loaded")


class ManifestCatalog:
    """Answers from manifests only (see the module docstring)."""

    def __init__(self, records: Iterable[Record]) -> None:
        self._loadable: dict[str, Record] = {}
        self._refused: dict[str, Record] = {}
        self._installed: dict[str, str] = {}
        for r in records:
            if r.manifest is None:
                continue
            self._installed.setdefault(r.manifest.name, r.manifest.alias)
            index = self._loadable if r.status in _LOADABLE else self._refused
            for key in (r.manifest.name, r.manifest.alias):
                index.setdefault(key, r)

    def kind_of(self, name: str) -> str | None:
        r = self._loadable.get(name)
        return r.manifest.kind if r is not None and r.manifest is not None else None

    def name_of(self, name: str) -> str | None:
        r = self._loadable.get(name)
        return r.manifest.name if r is not None and r.manifest is not None else None

    def names_of(self, name: str) -> set[str]:
        r = self._loadable.get(name)
        return {r.manifest.name, r.manifest.alias} if r is not None and r.manifest is not None else set()

    def settings_schema_of(self, name: str) -> str | None:
        r = self._loadable.get(name)
        return r.manifest.settings_schema if r is not None and r.manifest is not None else None

    def installed(self) -> dict[str, str]:
        return dict(sorted(self._installed.items()))

    def why_not(self, name: str) -> str | None:
        if name in self._loadable:
            return None
        r = self._refused.get(name)
        return f"{r.file} is {r.status}: {r.reason}" if r is not None else None
