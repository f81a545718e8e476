"""``GET /api/v1/admin/plugins``: the plugin inventory with trust verdicts (``?kind=`` filters).

One row per tarball of the running plugin set: file, name, alias, version, kind, publisher, the
signature verdict and the status (``loaded``, ``SKIPPED: ...``, ``INVALID: ...``, ``REJECTED:
...``), the same rows as ``busbar --list-plugins``. Source: docs/plugins.md, docs/admin.md#plugins-config-signing-key.
"""
from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request

from busbar.admin.context import admin_of
from busbar.admin.models import ErrorBody

router = APIRouter(tags=["plugins"])
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 403)}


def plugin_rows(reloader: Any) -> list[dict[str, Any]]:
    """The running set's records as dicts (``[]`` when plugins are disabled)."""
    if reloader is None:
        return []
    rows = []
    for r in reloader.current.records:
        m = r.manifest
        rows.append({"file": r.file, "name": m.name if m else None, "alias": m.alias if m else None,
                     "version": m.version if m else None, "kind": m.kind if m else None,
                     "publisher": m.publisher if m else None, "signature": r.signature, "status": r.status,
                     "reason": r.reason})
    return rows


@router.get("/plugins", responses=_ERRORS, summary="Plugin inventory with trust verdicts")
async def list_plugins(request: Request,
                       kind: Literal["auth", "hook", "store", "secret"] | None = None) -> dict[str, Any]:
    gw = admin_of(request).gateway
    rows = [r for r in plugin_rows(gw.plugins) if kind is None or r["kind"] == kind]
    return {"enabled": gw.config.plugins.enabled, "items": rows, "next_cursor": None}
