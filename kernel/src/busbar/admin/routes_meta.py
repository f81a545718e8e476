"""``/api/v1/admin``: ``GET /info``, ``GET /signing-key`` (public facts only), ``GET /openapi.json``.

``/signing-key`` answers the key id, the algorithm and the public key of ``auth.signing_key``
(never the private key), or 404 ``not_found`` when no key is loaded. Source: docs/admin.md.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from busbar import __version__
from busbar.admin.context import admin_of
from busbar.admin.errors import AdminError
from busbar.admin.models import ErrorBody
from busbar.admin.openapi import ADMIN_API_VERSION

router = APIRouter(tags=["meta"])
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 404)}


@router.get("/info", responses=_ERRORS, summary="Build, admin API version, topology counts")
async def info(request: Request) -> dict[str, Any]:
    ctx = admin_of(request)
    gw = ctx.gateway
    return {"version": __version__, "admin_api_version": ADMIN_API_VERSION, "started_at": int(ctx.started_at),
            "store": ctx.store.backend, "pools": sorted(gw.pools), "models": sorted(gw.lanes),
            "providers": sorted(gw.providers)}


@router.get("/signing-key", responses=_ERRORS, summary="The virtual-key signing key's public facts")
async def signing_key(request: Request) -> dict[str, Any]:
    info = admin_of(request).extras.get("signing_info")
    facts = info() if callable(info) else None
    if not facts:
        raise AdminError("not_found", "no signing key is loaded (keys are minted with auth.signing_key)")
    return dict(facts)


@router.get("/openapi.json", summary="This API's OpenAPI 3.1 document")
async def openapi_doc(request: Request) -> dict[str, Any]:
    doc: dict[str, Any] = request.app.openapi()
    return doc
