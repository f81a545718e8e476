"""``/api/v1/admin/audit``: the hash-chained audit log (``busbar.admin.audit``): list and verify.

``GET /audit?after=<seq>&limit=&action=&resource=`` pages ascending by ``seq`` (``next_cursor`` is
the last ``seq`` read, as a string); ``GET /audit/verify`` walks the whole chain and names the first
bad ``seq``. Source: docs/admin.md#audit-log.
"""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from busbar.admin.audit import verify
from busbar.admin.context import admin_of
from busbar.admin.errors import AdminError
from busbar.admin.models import ErrorBody

router = APIRouter(tags=["audit"])
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 403)}


class AuditItem(BaseModel):
    seq: int
    ts: int
    action: str
    resource: str
    outcome: str
    principal: str
    prev_hash: str
    hash: str


class AuditPage(BaseModel):
    items: list[AuditItem]
    next_cursor: str | None


class AuditVerdict(BaseModel):
    ok: bool
    records: int
    first_bad_seq: int | None
    reason: str


@router.get("/audit", response_model=AuditPage, responses=_ERRORS, summary="Audit records, oldest first")
async def list_audit(request: Request, cursor: str | None = None,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 200,
                     action: str | None = None, resource: str | None = None) -> dict[str, Any]:
    after = 0
    if cursor:
        if not cursor.isdigit() or len(cursor) > 18:
            raise AdminError("invalid_request", "cursor: not a cursor this API returned; start over without it")
        after = int(cursor)
    store = admin_of(request).store
    items: list[dict[str, Any]] = []
    last = after
    while len(items) < limit:
        page = await store.list_audit(after_seq=last, limit=1000)
        if not page:
            last = 0
            break
        for r in page:
            last = r.seq
            if (action is None or r.action == action) and (resource is None or r.resource == resource):
                items.append(r.to_wire())
                if len(items) >= limit:
                    break
        if len(items) >= limit:
            break
    more = bool(items) and len(items) >= limit and bool(await store.list_audit(after_seq=last, limit=1))
    return {"items": items, "next_cursor": str(last) if more else None}


@router.get("/audit/verify", response_model=AuditVerdict, responses=_ERRORS,
            summary="Verify the hash chain; names the first bad seq")
async def verify_audit(request: Request) -> dict[str, Any]:
    return (await verify(admin_of(request).store)).to_json()
