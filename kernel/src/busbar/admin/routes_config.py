"""``/api/v1/admin/config``: the running config's version, validation of a posted config, live apply.

``GET /config`` answers ``{version, sha256, started_at, path}`` (never the config itself: it holds
secret references) with the ``sha256`` as ETag. ``POST /config/apply`` (full) re-reads both files
from disk and applies them live (``busbar.server.apply.ConfigApplier``, what SIGHUP runs): 200
``{applied, config_version, faults, changed, reload_to_apply}``, or 400 ``invalid_request`` with the
fault lines when refused (nothing changes); both audited. ``GET /config/versions`` lists the
retained versions and ``GET /config/diff?from=&to=`` compares two (404 for one no longer
retained). ``POST /config/validate`` runs a posted
``{"config": "<config.yaml text>", "providers": "<providers.yaml text>"?}`` through the boot's own
pipeline (``busbar.config.load.load_config_text`` with the unsupported-key check, against this
process's environment) and answers ``{valid, errors, warnings}``: the lines ``busbar --validate``
would print, except that the value of any environment variable the posted text names is shown as
``${VAR}`` (a read-only caller cannot read the environment through a fault). Read-only scope;
nothing is applied.

Source: docs/admin.md#plugins-config-signing-key.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from busbar.admin.context import admin_of, principal_of
from busbar.admin.errors import AdminError, error_body
from busbar.admin.models import ErrorBody

router = APIRouter(tags=["config"])
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 403, 429)}
MAX_TEXT = 4 * 1024 * 1024


class ValidateRequest(BaseModel):
    """``POST /config/validate``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    config: str = Field(max_length=MAX_TEXT, description="config.yaml text")
    providers: str | None = Field(default=None, max_length=MAX_TEXT,
                                  description="providers.yaml text (omitted: the shipped catalog)")


class ValidateReply(BaseModel):
    valid: bool
    errors: list[str]
    warnings: list[str]


_ENV_NAME = re.compile(r"(?:\$\{\s*|env:\s*['\"]?)([A-Za-z_][A-Za-z0-9_]*)")


def _redactor(texts: list[str]) -> Callable[[str], str]:
    """Replace, in a fault line, the value of every environment variable the posted texts name
    (``${VAR}``, ``{ env: VAR }``) with ``${VAR}``: a read-only caller must not read the process's
    environment through the faults a value interpolated into the wrong key would produce."""
    names = {n for t in texts for n in _ENV_NAME.findall(t)}
    values = sorted(((os.environ[n], n) for n in names if len(os.environ.get(n, "").strip()) >= 3),
                    key=lambda vn: -len(vn[0]))

    def redact(line: str) -> str:
        for value, name in values:
            line = line.replace(value, f"${{{name}}}")
        return line
    return redact


def validate_text(config: str, providers: str | None) -> tuple[list[str], list[str]]:
    """``(errors, warnings)`` of a config text, as a boot would judge it (no plugin imported), with
    the values of the environment variables it names redacted (:func:`_redactor`)."""
    from busbar.config.errors import ConfigError
    from busbar.config.load import load_config_text

    redact = _redactor([config, providers or ""])
    try:
        loaded = load_config_text(config, os.environ, providers_text=providers, check_support=True)
    except ConfigError as e:
        return [redact(f) for f in e.faults], []
    from busbar.server.boot import check_plugins

    faults = check_plugins(loaded, os.environ)
    return [redact(f) for f in faults], ([] if faults else [redact(w) for w in loaded.warnings])


@router.post("/config/validate", response_model=ValidateReply, responses=_ERRORS,
             summary="Validate a posted config (what busbar --validate would print)")
async def validate_config(body: ValidateRequest) -> dict[str, Any]:
    errors, warnings = await asyncio.to_thread(validate_text, body.config, body.providers)
    return {"valid": not errors, "errors": errors, "warnings": warnings}


@router.get("/config", responses=_ERRORS, summary="The running config's version (ETag = sha256)")
async def config_version(request: Request) -> Response:
    ctx = admin_of(request)
    loaded = ctx.gateway.loaded
    digest = hashlib.sha256(loaded.config.model_dump_json().encode()).hexdigest()
    applier = ctx.app_state.applier
    version = applier.config_version if applier is not None else 1
    body = {"version": version, "sha256": digest, "started_at": int(ctx.app_state.started_at),
            "path": str(Path(loaded.config_path))}
    return JSONResponse(body, headers={"ETag": f'"{digest[:16]}"'})


def _applier(request: Request) -> Any:
    applier = admin_of(request).app_state.applier
    if applier is None:
        raise AdminError("not_found", "this process applies no config live")
    return applier


@router.post("/config/apply", responses=_ERRORS, summary="Re-read the config files and apply them live")
async def apply_config(request: Request) -> Response:
    ctx = admin_of(request)
    result = await _applier(request).apply("api")
    body = result.to_json()
    principal = principal_of(request).name
    if not result.applied:
        await ctx.audit.append("config.apply", f"config/{body['config_version']}", "refused", principal)
        refused = error_body("invalid_request", "the config on disk was refused; nothing changed: "
                                                + "; ".join(body["faults"]))
        return JSONResponse({**refused, **body}, status_code=400)
    await ctx.audit.append("config.apply", f"config/{body['config_version']}", "ok", principal)
    return JSONResponse(body)


@router.get("/config/versions", responses=_ERRORS, summary="Retained config versions, oldest first")
async def config_versions(request: Request) -> dict[str, Any]:
    return {"items": [v.summary() for v in _applier(request).versions], "next_cursor": None}


@router.get("/config/diff", responses={**_ERRORS, 404: {"model": ErrorBody}},
            summary="Key-by-key differences between two retained versions")
async def config_diff(request: Request, from_: Annotated[int, Query(alias="from", ge=1)],
                      to: Annotated[int, Query(ge=1)]) -> dict[str, Any]:
    changes = _applier(request).diff(from_, to)
    if changes is None:
        raise AdminError("not_found", f"version {from_} or {to} is no longer retained (see /config/versions)")
    return {"from": from_, "to": to, "changes": changes}
