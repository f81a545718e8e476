"""``/api/v1/admin/hooks``: the running hook instances and their management messages.

``GET /hooks`` lists instances; ``GET /hooks/{name}`` inspects one (grant, settings with secret-
looking values redacted, desired / acknowledged settings version, call counters); ``GET
/hooks/{name}/schema`` asks the hook to ``describe`` its settings; ``GET /hooks/{name}/status`` asks
for its ``status`` (bounded, sanitized metrics, drift against the desired version); ``PATCH
/hooks/{name}/settings`` merges ``{"settings": {...}}`` into the current settings (JSON merge
patch: ``null`` removes a key) and pushes it with ``configure`` at the next ``settings_version``:
the change takes only on the hook's exact ack (409 ``conflict`` otherwise, settings unchanged).
Management calls run off the event loop (5 s deadline each).

Source: docs/hooks.md#management-messages, docs/admin.md#hooks.
"""
from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from busbar.admin.context import admin_of, principal_of
from busbar.admin.errors import AdminError
from busbar.admin.models import ErrorBody
from busbar.hooks.facade import HookFacade
from busbar.store.shared import follow_settings

router = APIRouter(tags=["hooks"])
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409)}
_SECRETISH = re.compile(r"(token|secret|password|passwd|api[_-]?key|authorization|credential|private)", re.I)
REDACTED = "<redacted>"


class SettingsPatch(BaseModel):
    """``PATCH /hooks/{name}/settings``."""

    model_config = ConfigDict(extra="forbid")
    settings: dict[str, Any]


def redact(value: Any, key: str = "") -> Any:
    """``value`` with every member whose key looks secret (token, secret, password, api key, ...)
    replaced by ``"<redacted>"``, recursively."""
    if key and _SECRETISH.search(key):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _facades(request: Request) -> list[HookFacade]:
    engine = admin_of(request).gateway.hooks
    return list(engine.facades) if engine is not None else []


def _facade(request: Request, name: str) -> HookFacade:
    for f in _facades(request):
        if f.name == name:
            return f
    raise AdminError("not_found", f"no running hook '{name}'")


def _summary(f: HookFacade) -> dict[str, Any]:
    return {"name": f.name, "prompt": f.prompt, "user": f.user, "settings_version": f.settings_version,
            "acked_version": f.acked_version}


@router.get("/hooks", responses=_ERRORS, summary="Running hook instances")
async def list_hooks(request: Request) -> dict[str, Any]:
    return {"items": [_summary(f) for f in _facades(request)], "next_cursor": None}


@router.get("/hooks/{name}", responses=_ERRORS, summary="Inspect one hook instance")
async def inspect_hook(request: Request, name: str) -> dict[str, Any]:
    f = _facade(request, name)
    return {**_summary(f), "settings": redact(f.settings), "inline": f.inline, "on_loop": f.on_loop,
            "counters": {"calls": f.calls, "timeouts": f.timeouts, "errors": f.errors, "garbage": f.garbage,
                         "saturated": f.saturated},
            "latency_us_ewma": round(f.latency_us, 1)}


@router.get("/hooks/{name}/schema", responses=_ERRORS, summary="The hook's settings schema (describe)")
async def hook_schema(request: Request, name: str) -> dict[str, Any]:
    f = _facade(request, name)
    schema = await asyncio.to_thread(f.describe)
    return {"name": f.name, "supported": schema is not None, "schema": schema}


@router.get("/hooks/{name}/status", responses=_ERRORS, summary="The hook's reported state (status)")
async def hook_status(request: Request, name: str) -> dict[str, Any]:
    f = _facade(request, name)
    report = await asyncio.to_thread(f.status)
    if report is None:
        return {"name": f.name, "supported": False, "desired_version": f.settings_version}
    return {"name": f.name, "supported": True, "desired_version": f.settings_version,
            "settings_version": report.settings_version, "drift": report.drift,
            "settings": redact(report.settings), "metrics": list(report.metrics), "dropped": report.dropped}


def merge_patch(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7396 JSON merge patch of two objects (``null`` removes a key)."""
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_patch(out[k], v)
        else:
            out[k] = v
    return out


@router.patch("/hooks/{name}/settings", responses=_ERRORS,
              summary="Merge settings and push them with configure (takes only on the exact ack)")
async def patch_hook_settings(request: Request, name: str, body: SettingsPatch) -> dict[str, Any]:
    ctx = admin_of(request)
    f = _facade(request, name)
    new = merge_patch(f.settings, body.settings)
    faults = f.settings_faults(new)
    if faults:
        raise AdminError("invalid_request", f"hook '{name}': {'; '.join(faults)}")
    version = f.settings_version + 1
    acked = await asyncio.to_thread(f.configure, new, version)
    principal = principal_of(request).name
    if not acked:
        await ctx.audit.append("hook.configure", f"hook/{name}", "not_acknowledged", principal)
        raise AdminError("conflict", f"hook '{name}' did not acknowledge settings_version {version}; its "
                                     f"settings are unchanged (see the server log)")
    follow_settings(f)                  # its shared state: the namespace of the new settings
    await ctx.audit.append("hook.configure", f"hook/{name}", "ok", principal)
    return {"name": f.name, "settings_version": f.settings_version, "acked": True,
            "settings": redact(f.settings)}
