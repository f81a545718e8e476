"""The load pipeline: discover, validate, trust, check conflicts and requirements, unpack, import.

Phases, each collecting every fault before failing once:

1. **read** each tarball once (:func:`busbar.loader.discover.read_tarball`: no link followed, size
   from ``fstat`` first, a bounded read), check every archive member and parse the manifest
   strictly (:func:`busbar_sdk.artifact.read_signed_parts`): a fault (INVALID) naming the file.
2. **trust** (:func:`busbar.loader.verify.evaluate_trust`) on those parsed bytes, before any
   manifest field is acted on: skipped plugins are logged and recorded (SKIPPED), never faults and
   never imported. Only then, for a plugin that may load, the manifest is acted on
   (:func:`busbar_sdk.artifact.complete_artifact`: sha256 of the wheel, ``abi_version``, the
   wheel's own checks): a failure is INVALID. Then downgrade protection
   (:mod:`busbar.loader.highwater`).
3. **conflicts** among loadable plugins: a shared name or alias, a shared top-level Python
   module, a module that would shadow the kernel's environment (REJECTED, naming both files).
4. **requirements**: every ``requires_dist`` must be satisfied by the running environment.
5. **admit** (when the caller passes ``admit``): the config's references to plugins are checked
   against the manifest catalog (:class:`busbar.loader.catalog.ManifestCatalog`): a hook
   ``module:`` typo, a referenced plugin that was skipped, a kind mismatch. Nothing is imported yet.
6. **import** (``import_code=True`` only): unpack into the staging root, import the entry point,
   bind the ABI, cross-check the kind (REJECTED on failure; everything imported by this call is
   rolled back).

``busbar --validate`` runs phases 1-5 and ``--list-plugins`` phases 1-4 (``import_code=False``):
nothing is imported, nothing written to disk.

Source: docs/plugins.md, docs/configuration.md#startup-checks (plugin rows)
"""
from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from busbar_sdk import BindingError
from busbar_sdk.artifact import (
    DEFAULT_LIMITS,
    Artifact,
    ArtifactError,
    Limits,
    OwnedModules,
    PluginImporter,
    bind_plugin,
    complete_artifact,
    environment_provides,
    read_signed_parts,
    unmet_requirements,
)

from busbar import __version__ as KERNEL_VERSION
from busbar.config.schema_plugins import PluginsConfig
from busbar.loader.catalog import ManifestCatalog
from busbar.loader.discover import TarballRefused, discover, display_name, plugins_dir, read_tarball
from busbar.loader.errors import PluginBootError
from busbar.loader.highwater import (
    ALLOW_ENV,
    HighWaterError,
    below_mark,
    high_water_path,
    read_marks,
    record_marks,
)
from busbar.loader.registry import LoadedPlugin, PluginSet, Record
from busbar.loader.release_key import embedded_release_key
from busbar.loader.unpack import Staging, default_staging
from busbar.loader.verify import evaluate_trust

__all__ = ["EMBEDDED", "IMPORTER", "Admit", "load_plugins", "scan", "unload"]

#: ``admit(catalog) -> fault lines``: the config's plugin references checked against the manifests.
Admit = Callable[[ManifestCatalog], list[str]]

log = logging.getLogger("busbar.plugins")

#: The process-wide importer every kernel-loaded plugin's modules resolve through.
IMPORTER = PluginImporter()


class _Embedded:
    def __repr__(self) -> str:
        return "EMBEDDED"


#: Sentinel: use the release key embedded in this kernel (the default of ``release_key``).
EMBEDDED = _Embedded()


@dataclass
class _Entry:
    path: Path
    record: Record
    identity: str = ""
    artifact: Artifact | None = None

    @property
    def ready(self) -> bool:
        return self.record.status == "ready"

    def reject(self, reason: str) -> None:
        self.record = self.record.with_status("REJECTED", reason)


def _read_one(path: Path, file: str, cfg: PluginsConfig, release_key: bytes | None, kernel_version: str,
              limits: Limits) -> _Entry:
    try:
        data = read_tarball(path, limits.archive_bytes)
    except TarballRefused as exc:
        return _Entry(path, Record(file, None, "-", "INVALID", str(exc)))
    identity = hashlib.sha256(data).hexdigest()
    try:
        parts = read_signed_parts(data, limits=limits)     # the archive + a strict parse, nothing acted on
    except ArtifactError as exc:
        return _Entry(path, Record(file, None, "-", "INVALID", exc.reason), identity)
    m = parts.manifest
    verdict = evaluate_trust(m, parts.manifest_obj, cfg.trust, cfg.min_versions, release_key=release_key,
                             kernel_version=kernel_version)
    if not verdict.loadable:      # never act on a field whose signature does not hold
        return _Entry(path, Record(file, m, verdict.signature, "SKIPPED", verdict.reason), identity)
    try:
        artifact = complete_artifact(parts, limits=limits)
    except ArtifactError as exc:
        return _Entry(path, Record(file, m, verdict.signature, "INVALID", exc.reason), identity)
    return _Entry(path, Record(file, m, verdict.signature, "ready", verdict.reason), identity, artifact)


def _conflicts(entries: Sequence[_Entry]) -> list[str]:
    faults: list[str] = []
    claims: dict[str, _Entry] = {}
    modules: dict[str, _Entry] = {}
    for e in entries:
        if not e.ready or e.artifact is None:
            continue
        m = e.artifact.manifest
        for key in dict.fromkeys((m.name, m.alias)):
            other = claims.get(key)
            if other is None:
                claims[key] = e
                continue
            o = other.artifact.manifest  # type: ignore[union-attr]
            if o.name == m.name:
                why = f"both are plugin {m.name!r} (versions {o.version} and {m.version}); keep one file"
            elif o.alias == m.alias == key:
                why = (f"alias {key!r} is claimed by both {o.name!r} and {m.name!r}; remove one file or repack "
                       f"one with another --alias")
            else:
                named, aliased = (o, m) if o.name == key else (m, o)
                why = (f"{key!r} is the name of {named.name!r} and the alias of {aliased.name!r}; repack one "
                       f"with another --name/--alias")
            line = f"{other.record.file} and {e.record.file}: plugin conflict: {why}"
            faults.append(line)
            for x in (other, e):
                if x.record.status != "REJECTED":
                    x.reject(line.split(": ", 1)[1])
            break
    for e in entries:
        if not e.ready or e.artifact is None:
            continue
        for mod in e.artifact.wheel.top_level:
            other = modules.setdefault(mod, e)
            if other is not e and other.ready:
                line = (f"{other.record.file} and {e.record.file}: both provide the top-level Python module "
                        f"{mod!r}; plugins cannot share module names, rename one package")
                faults.append(line)
                other.reject(line.split(": ", 1)[1])
                e.reject(line.split(": ", 1)[1])
                break
            where = environment_provides(mod)
            if where is not None:
                reason = (f"its top-level module {mod!r} would shadow {where} in the kernel's environment; "
                          f"rename the plugin's package")
                faults.append(f"{e.record.file}: {reason}")
                e.reject(reason)
                break
    return faults


def _downgrades(entries: Sequence[_Entry], marks: dict[str, str], allowed: frozenset[str]) -> list[str]:
    """Refuse every loadable plugin below its high-water mark, unless the operator allowed it."""
    faults: list[str] = []
    for e in entries:
        if not e.ready or e.artifact is None:
            continue
        m = e.artifact.manifest
        mark = marks.get(m.name)
        if not below_mark(m.version, mark):
            continue
        if m.name in allowed:
            log.warning("%s: downgrade from %s to %s of %r allowed by %s", e.record.file, mark, m.version,
                        m.name, ALLOW_ENV)
            continue
        reason = (f"downgrade from {mark} to {m.version} of {m.name!r} refused ({mark} is the highest version "
                  f"this gateway has loaded); install {mark} or newer, or allow it for one boot with "
                  f"{ALLOW_ENV}={m.name}")
        faults.append(f"{e.record.file}: {reason}")
        e.reject(reason)
    return faults


def scan(cfg: PluginsConfig, *, base_dir: Path, release_key: bytes | None, kernel_version: str = KERNEL_VERSION,
         limits: Limits = DEFAULT_LIMITS,
         allow_downgrade: frozenset[str] = frozenset()) -> tuple[list[_Entry], list[str]]:
    """Phases 1-4 over ``plugins.dir``; returns ``(entries, faults)`` and never raises for a tarball.

    Trust includes downgrade protection (:mod:`busbar.loader.highwater`): a loadable plugin below the
    version mark recorded beside ``plugins.dir`` is REJECTED (a fault) unless its name is in
    ``allow_downgrade``. Nothing is written.

    Raises:
        PluginBootError: ``plugins.dir`` is missing or not a directory.
    """
    directory = plugins_dir(cfg.dir, base_dir)
    try:
        paths = discover(directory)
    except FileNotFoundError:
        raise PluginBootError([(f"plugins.dir: {directory} does not exist (plugins.enabled is true); create it "
                               f"or point plugins.dir at the directory holding the plugin tarballs")]) from None
    except NotADirectoryError:
        raise PluginBootError([f"plugins.dir: {directory} is not a directory"]) from None
    entries = [_read_one(p, display_name(cfg.dir, p), cfg, release_key, kernel_version, limits) for p in paths]
    faults = [f"{e.record.file}: {e.record.reason}" for e in entries if e.record.status == "INVALID"]
    try:
        marks = read_marks(high_water_path(directory))
    except HighWaterError as exc:
        faults.append(str(exc))
        marks = {}
    faults += _downgrades(entries, marks, allow_downgrade)
    faults += _conflicts(entries)
    for e in entries:
        if e.ready and e.artifact is not None:
            unmet = unmet_requirements(e.artifact.manifest.requires_dist)
            if unmet:
                faults += [f"{e.record.file}: {r}" for r in unmet]
                e.reject("; ".join(unmet))
    return entries, faults


def _log_policy(cfg: PluginsConfig, entries: Sequence[_Entry]) -> None:
    if cfg.trust.allow_unsigned:
        log.warning("plugins.trust.allow_unsigned is true: plugins without a valid signature may load (UNSAFE)")
    if cfg.trust.allow_third_party:
        log.warning("plugins.trust.allow_third_party is true: plugins from unknown publishers may load (UNSAFE)")
    for e in entries:
        if e.record.status == "SKIPPED":
            log.warning("%s: SKIPPED: %s", e.record.file, e.record.reason)
        elif e.ready and e.record.reason:
            log.warning("%s: %s", e.record.file, e.record.reason)


def load_plugins(cfg: PluginsConfig, *, base_dir: Path, import_code: bool = True,
                 release_key: bytes | _Embedded | None = EMBEDDED, kernel_version: str = KERNEL_VERSION,
                 staging: Staging | None = None, limits: Limits = DEFAULT_LIMITS,
                 previous: PluginSet | None = None, admit: Admit | None = None,
                 allow_downgrade: frozenset[str] = frozenset()) -> PluginSet:
    """Build the plugin set from ``plugins.dir``.

    Args:
        cfg: the ``plugins:`` block.
        base_dir: where a relative ``plugins.dir`` resolves (the working directory).
        import_code: ``False`` for ``--validate`` / ``--list-plugins``: phases 1-4 only, nothing
            imported or unpacked; the returned plugins cannot be opened.
        release_key: the 32-byte first-party key; default: the one embedded in this kernel.
        kernel_version: the first-party floor (default: this kernel's version).
        staging: where wheels are unpacked (default: a private per-process root).
        limits: artifact size limits.
        previous: the running set, on a hot reload: identical tarballs reuse its imported
            plugins, and the modules of plugins being replaced are detached (restored on failure).
        admit: checks the config's plugin references against the manifest catalog after phases
            1-4 and before anything is imported; its fault lines abort the load.
        allow_downgrade: manifest names that may load below their high-water mark this time
            (``BUSBAR_ALLOW_DOWNGRADE``); after an import the marks are raised to (or, for these
            names, set to) the versions loaded with a trusted signature.

    Returns:
        The :class:`PluginSet`; empty with ``enabled=False`` when ``plugins.enabled`` is false
        (nothing is discovered: a dropped tarball is inert).

    Raises:
        PluginBootError: ``.faults`` lists every invalid tarball, conflict, unmet requirement and
            (with ``import_code``) import/ABI/kind failure, one line each.
    """
    if not cfg.enabled:
        return PluginSet.build(enabled=False, plugins=(), records=(), imported=import_code)
    key = embedded_release_key() if isinstance(release_key, _Embedded) else release_key
    entries, faults = scan(cfg, base_dir=base_dir, release_key=key, kernel_version=kernel_version,
                           limits=limits, allow_downgrade=allow_downgrade)
    _log_policy(cfg, entries)
    if faults:
        raise PluginBootError(faults)
    if admit is not None:
        faults = admit(ManifestCatalog(e.record for e in entries))
        if faults:
            raise PluginBootError(faults)
    if not import_code:
        plugins = tuple(LoadedPlugin(e.record.file, e.artifact.manifest, e.record.signature, e.identity)
                        for e in entries if e.ready and e.artifact is not None)
        return PluginSet.build(enabled=True, plugins=plugins, records=tuple(e.record for e in entries),
                               imported=False)
    loaded = _import_all(entries, staging or default_staging(), limits, previous)
    record_marks(high_water_path(plugins_dir(cfg.dir, base_dir)),
                 ((p.name, p.manifest.version, p.verdict) for p in loaded.plugins), allow_downgrade)
    return loaded


def _import_all(entries: list[_Entry], staging: Staging, limits: Limits, previous: PluginSet | None) -> PluginSet:
    reusable = {p.identity: p for p in (previous.plugins if previous else ()) if p.imported}
    kept_owners = {reusable[e.identity].owner for e in entries if e.ready and e.identity in reusable}
    created: list[LoadedPlugin] = []
    detached: list[tuple[str, OwnedModules]] = []
    plugins: list[LoadedPlugin] = []
    faults: list[str] = []
    for e in entries:
        if not e.ready or e.artifact is None:
            continue
        m, old = e.artifact.manifest, reusable.get(e.identity)
        if old is not None:
            plugins.append(LoadedPlugin(e.record.file, m, e.record.signature, e.identity, binding=old.binding,
                                        directory=old.directory, owner=old.owner))
            continue
        try:
            directory = staging.unpack(e.artifact, limits)
        except ArtifactError as exc:
            faults.append(f"{e.record.file}: {exc.reason}")
            e.reject(exc.reason)
            continue
        owner = f"{m.name}@{directory.name}"
        wheel = e.artifact.wheel
        for mod in wheel.top_level:
            holder = IMPORTER.owner_of(mod)
            if holder is not None and holder != owner and holder not in kept_owners:
                saved = IMPORTER.detach(holder)
                if saved is not None:
                    detached.append((holder, saved))
        plugin = LoadedPlugin(e.record.file, m, e.record.signature, e.identity, directory=directory, owner=owner)
        created.append(plugin)
        try:
            obj = IMPORTER.load(owner, directory, wheel.top_level, wheel.entry_point[1], wheel.entry_point[2])
            plugin.binding = bind_plugin(obj, name=m.name, expected_kind=m.kind)
        except BindingError as exc:
            faults.append(f"{e.record.file}: {exc}")
            e.reject(str(exc))
            continue
        plugins.append(plugin)
    if faults:
        for p in created:
            IMPORTER.forget(p.owner)
            if p.directory is not None:
                staging.remove(p.directory)
        for holder, saved in reversed(detached):
            IMPORTER.reattach(holder, saved)
        raise PluginBootError(faults, imported=True)
    records = tuple(e.record.with_status("loaded", e.record.reason) if e.ready else e.record for e in entries)
    loaded = PluginSet.build(enabled=True, plugins=tuple(plugins), records=records, imported=True, staging=staging)
    log.info("plugins: %d loaded (%s), %d skipped", len(plugins), ", ".join(p.name for p in plugins) or "none",
             sum(1 for e in entries if e.record.status == "SKIPPED"))
    return loaded


def unload(plugin_set: PluginSet, *, keep: PluginSet | Sequence[PluginSet] = ()) -> None:
    """Retire a set: forget the modules of every plugin not shared with a set in ``keep`` and
    delete the directories it unpacked. Callers close their own instances first; objects still
    referenced keep working (their modules live on through references)."""
    keep_sets = (keep,) if isinstance(keep, PluginSet) else tuple(keep)
    kept = {p.owner for ks in keep_sets for p in ks.plugins}
    staging = plugin_set.staging
    for p in plugin_set.plugins:
        if not p.imported or p.owner in kept:
            continue
        IMPORTER.forget(p.owner)
        if p.directory is not None and staging is not None and p.directory.parent == staging.root:
            staging.remove(p.directory)
