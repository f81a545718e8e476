"""``/api/v1/admin/config``: the running config's version, and validation of a posted config.

``GET /config`` answers ``{version, sha256, started_at, path}`` (never the config itself: it holds
secret references) with the ``sha256`` as ETag. ``POST /config/validate`` runs a posted
``{"config": "<config.yaml text>", "providers": "<providers.yaml text>"?}`` through the boot's own
pipeline (``busbar.config.load.load_config_text`` with the unsupported-key check, against this
process's environment) and answers ``{valid, errors, warnings}``: the lines ``busbar --validate``
would print. Read-only scope; nothing is applied.

Source: docs/admin.md#config.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from busbar.admin.context import admin_of
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


def validate_text(config: str, providers: str | None) -> tuple[list[str], list[str]]:
    """``(errors, warnings)`` of a config text, as a boot would judge it (no plugin imported)."""
    from busbar.config.errors import ConfigError
    from busbar.config.load import load_config_text

    try:
        loaded = load_config_text(config, os.environ, providers_text=providers, check_support=True)
    except ConfigError as e:
        return list(e.faults), []
    from busbar.server.boot import check_plugins

    faults = check_plugins(loaded, os.environ)
    return faults, ([] if faults else list(loaded.warnings))


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
    version = int(ctx.extras.get("config_version", 1))
    body = {"version": version, "sha256": digest, "started_at": int(ctx.app_state.started_at),
            "path": str(Path(loaded.config_path))}
    return JSONResponse(body, headers={"ETag": f'"{digest[:16]}"'})
