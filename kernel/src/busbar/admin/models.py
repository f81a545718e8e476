"""Request and reply bodies of the admin API (pydantic; unknown fields are refused with a 400).

Source: docs/admin.md#keys.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class MintRequest(_Body):
    """``POST /api/v1/admin/keys``."""

    name: str = Field(min_length=1, max_length=128, description="A label for people (not unique).")
    group: str | None = Field(default=None, min_length=1, max_length=128,
                              description="The configured (or, with parent, auto-provisioned) group to bind.")
    parent: str | None = Field(default=None, min_length=1, max_length=128,
                               description="Auto-provision `group` under this existing group when it does not "
                                           "exist; when it exists this must be its parent.")
    allowed_pools: list[str] | None = Field(default=None, max_length=1000,
                                            description="Omitted = every pool; [] = none.")
    labels: dict[str, str] | None = Field(default=None, max_length=64)
    expires_in: str | None = Field(default=None, max_length=16, description='A duration: "2s", "30m", "7d".')
    expires_at: int | None = Field(default=None, ge=0, le=2**40, description="Unix seconds.")
    issue_aws_credential: bool = Field(default=False,
                                       description="Also return an AWS access-key pair (SigV4 ingress), once.")


class RotateRequest(_Body):
    """``POST /api/v1/admin/keys/{key_id}/rotate`` (optional body)."""

    expires_in: str | None = Field(default=None, max_length=16)
    expires_at: int | None = Field(default=None, ge=0, le=2**40)


class PatchKeyRequest(_Body):
    """``PATCH /api/v1/admin/keys/{key_id}``: ``group`` is three-state (absent = unchanged, null =
    unbind, a name = rebind to an existing group)."""

    enabled: bool | None = None
    group: str | None = Field(default=None, min_length=1, max_length=128)


class RevokeRequest(_Body):
    """``POST /api/v1/admin/keys/{key_id}/revoke`` (optional body)."""

    reason: str = Field(default="revoked by an operator", max_length=256)


class CredentialView(BaseModel):
    """A key's credential without its secret."""

    id: str
    kind: str
    public_id: str
    created_at: int
    expires_at: int | None = None
    revoked_at: int | None = None


class KeyView(BaseModel):
    """A key's metadata (never a token or a secret)."""

    id: str
    name: str
    state: str = Field(description="active | disabled | expired | revoked | tombstoned")
    enabled: bool
    group: str | None
    allowed_pools: list[str] | None
    labels: dict[str, str]
    created_at: int
    expires_at: int | None
    deleted_at: int | None
    generation: int
    credentials: list[CredentialView] = Field(default_factory=list)


class MintReply(KeyView):
    """The mint / rotate reply: the key plus its token (shown once) and, when asked for, the AWS pair."""

    token: str
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None
    warnings: list[str] = Field(default_factory=list)


class KeyPage(BaseModel):
    """One page of keys."""

    items: list[KeyView]
    next_cursor: str | None


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """Every admin error."""

    error: ErrorDetail


def view_dict(model: BaseModel) -> dict[str, Any]:
    """A reply model as a JSON-ready dict."""
    return model.model_dump(mode="json")
