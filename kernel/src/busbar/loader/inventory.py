"""``busbar --list-plugins``: the manifest-only inventory of ``plugins.dir``, one row per tarball.

Columns: FILE, NAME, ALIAS, VERSION, KIND, PUBLISHER, SIGNATURE (the trust verdict), STATUS
(``ready`` = would load; ``loaded``; ``SKIPPED: <reason>`` by the trust policy; ``INVALID:
<reason>`` structurally; ``REJECTED: <reason>`` for a conflict or an unmet requirement). Nothing
is imported, so a kind mismatch (which only the plugin's own code can report) shows up at boot,
not here; :func:`inventory_lines` renders a loaded set, which does include it. Never raises for a
tarball: an untrusted directory lists fine (exit 0).

Source: docs/plugins.md.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from busbar.config.schema_plugins import PluginsConfig
from busbar.loader.errors import PluginBootError
from busbar.loader.pipeline import EMBEDDED, _Embedded, scan
from busbar.loader.registry import PluginSet, Record
from busbar.loader.release_key import embedded_release_key

__all__ = ["HEADER", "format_records", "inventory_lines", "list_plugins_lines"]

HEADER = ("FILE", "NAME", "ALIAS", "VERSION", "KIND", "PUBLISHER", "SIGNATURE", "STATUS")


def _row(r: Record) -> tuple[str, ...]:
    m = r.manifest
    if not r.reason:
        status = r.status
    elif r.status in ("ready", "loaded"):
        status = f"{r.status} ({r.reason})"
    else:
        status = f"{r.status}: {r.reason}"
    if m is None:
        return (r.file, "-", "-", "-", "-", "-", r.signature, status)
    return (r.file, m.name, m.alias, m.version, m.kind, m.publisher, r.signature, status)


def format_records(records: Iterable[Record]) -> list[str]:
    """Align the rows under :data:`HEADER`; the last column (STATUS) is never padded."""
    rows = [HEADER] + [_row(r) for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER) - 1)]
    return ["  ".join([c.ljust(w) for c, w in zip(row[:-1], widths)] + [row[-1]]).rstrip() for row in rows]


def list_plugins_lines(cfg: PluginsConfig, base_dir: Path, *,
                       release_key: bytes | _Embedded | None = EMBEDDED) -> list[str]:
    """The ``--list-plugins`` output: the header row, then one row per tarball (file order).

    With ``plugins.enabled: false`` the header is followed by one ``#`` line saying so (nothing
    is discovered); a missing ``plugins.dir`` gives a ``#`` line naming it.
    """
    if not cfg.enabled:
        return format_records([]) + [("# plugins.enabled is false: no plugin is discovered or loaded "
                                     "(set plugins.enabled: true)")]
    key = embedded_release_key() if isinstance(release_key, _Embedded) else release_key
    try:
        entries, _ = scan(cfg, base_dir=base_dir, release_key=key)
    except PluginBootError as exc:
        return format_records([]) + [f"# {line}" for line in exc.faults]
    return format_records(e.record for e in entries)


def inventory_lines(plugin_set: PluginSet) -> list[str]:
    """The same table for an already built set (status ``loaded`` once imported)."""
    return format_records(plugin_set.records)
