"""``/api/v1/admin/keys``: mint, list, get, patch, revoke, rotate, delete (``busbar.admin.keys``).

Mint and rotate honour ``Idempotency-Key`` (``busbar.admin.idempotency``); get / patch / revoke /
rotate / delete answer an ``ETag`` and take ``If-Match``. Only the mint and rotate replies carry a
token. Source: docs/admin.md#keys.
"""
from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Query, Request
from fastapi.responses import JSONResponse, Response

from busbar.admin.context import admin_of, principal_of
from busbar.admin.errors import AdminError
from busbar.admin.keys import etag_of
from busbar.admin.models import (
    ErrorBody,
    KeyPage,
    KeyView,
    MintReply,
    MintRequest,
    PatchKeyRequest,
    RevokeRequest,
    RotateRequest,
)

router = APIRouter(tags=["keys"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 429)}


def _cursor_out(last: str | None) -> str | None:
    return base64.urlsafe_b64encode(last.encode()).decode().rstrip("=") if last else None


def _cursor_in(cursor: str | None) -> str | None:
    if not cursor:
        return None
    try:
        last = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        last = ""
    if not last.startswith("vk_"):
        raise AdminError("invalid_request", "cursor: not a cursor this API returned; start over without it")
    return last


async def _idempotent(request: Request, make: Callable[[], Awaitable[dict[str, Any]]], status: int,
                      key: str | None) -> Response:
    if key is None:
        return JSONResponse(await make(), status_code=status)
    if not 1 <= len(key) <= 255:
        raise AdminError("invalid_request", "Idempotency-Key: must be 1 to 255 characters")
    ctx = admin_of(request)
    scope = (principal_of(request).name, f"{request.method} {request.url.path}", key)
    digest = ctx.idempotency.digest(await request.body())
    hit = ctx.idempotency.lookup(scope, digest)
    if hit is False:
        raise AdminError("conflict", "Idempotency-Key was already used with a different request body; use a "
                                     "new key")
    if isinstance(hit, tuple):
        return JSONResponse(hit[1], status_code=hit[0], headers={"Idempotent-Replayed": "true"})
    body = await make()
    ctx.idempotency.store(scope, digest, status, body)
    return JSONResponse(body, status_code=status)


@router.post("/keys", status_code=201, response_model=MintReply, responses=_ERRORS,
             summary="Mint a key (the token is in this reply only)")
async def mint_key(request: Request, body: MintRequest,
                   idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None) -> Response:
    ctx = admin_of(request)
    principal = principal_of(request).name
    return await _idempotent(request, lambda: ctx.keys.mint(body, principal), 201, idempotency_key)


@router.get("/keys", response_model=KeyPage, responses=_ERRORS, summary="List keys (no secrets)")
async def list_keys(request: Request, cursor: str | None = None,
                    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
                    group: str | None = None, enabled: bool | None = None, prefix: str | None = None,
                    include: Literal["tombstoned"] | None = None) -> dict[str, Any]:
    items, last = await admin_of(request).keys.page(group=group, enabled=enabled, prefix=prefix,
                                                    include_tombstoned=include == "tombstoned",
                                                    after=_cursor_in(cursor), limit=limit)
    return {"items": [i.model_dump(mode="json") for i in items], "next_cursor": _cursor_out(last)}


async def _view_reply(request: Request, key_id: str, status: int = 200) -> Response:
    ctx = admin_of(request)
    key = await ctx.keys.get(key_id)
    view = await ctx.keys.view(key)
    return JSONResponse(view.model_dump(mode="json"), status_code=status, headers={"ETag": etag_of(key)})


@router.get("/keys/{key_id}", response_model=KeyView, responses=_ERRORS, summary="One key (ETag)")
async def get_key(request: Request, key_id: str) -> Response:
    return await _view_reply(request, key_id)


@router.patch("/keys/{key_id}", response_model=KeyView, responses=_ERRORS,
              summary="Freeze/unfreeze, rebind/unbind (group: absent = unchanged, null = unbind)")
async def patch_key(request: Request, key_id: str, body: PatchKeyRequest,
                    if_match: Annotated[str | None, Header(alias="If-Match")] = None) -> Response:
    await admin_of(request).keys.patch(key_id, body, if_match, principal_of(request).name)
    return await _view_reply(request, key_id)


@router.post("/keys/{key_id}/revoke", response_model=KeyView, responses=_ERRORS,
             summary="Revoke (denylist; the row stays; no un-revoke)")
async def revoke_key(request: Request, key_id: str, body: Annotated[RevokeRequest | None, Body()] = None,
                     if_match: Annotated[str | None, Header(alias="If-Match")] = None) -> Response:
    reason = body.reason if body is not None else RevokeRequest().reason
    await admin_of(request).keys.revoke(key_id, reason, if_match, principal_of(request).name)
    return await _view_reply(request, key_id)


@router.post("/keys/{key_id}/rotate", response_model=MintReply, responses=_ERRORS,
             summary="Rotate (a new token; every older one stops verifying)")
async def rotate_key(request: Request, key_id: str, body: Annotated[RotateRequest | None, Body()] = None,
                     if_match: Annotated[str | None, Header(alias="If-Match")] = None,
                     idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None) -> Response:
    ctx = admin_of(request)
    req = body if body is not None else RotateRequest()
    principal = principal_of(request).name
    return await _idempotent(request, lambda: ctx.keys.rotate(key_id, req, if_match, principal), 200,
                             idempotency_key)


@router.delete("/keys/{key_id}", response_model=KeyView, responses=_ERRORS,
               summary="Delete (tombstone: credentials destroyed, subject denylisted, row kept)")
async def delete_key(request: Request, key_id: str,
                     if_match: Annotated[str | None, Header(alias="If-Match")] = None) -> Response:
    await admin_of(request).keys.delete(key_id, if_match, principal_of(request).name)
    return await _view_reply(request, key_id)
