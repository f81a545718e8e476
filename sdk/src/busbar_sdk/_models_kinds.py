"""Typed models of the secret, auth and store payloads (abi_version 1 of each kind).

* secret: ``{"op": "resolve", "settings": {...}, "deadline_ms": int}`` -> ``{"value": str}`` |
  ``{"value_b64": str}`` | ``{"error": {"kind", "message"}}``.
* auth: ``{"op": "name"}`` -> ``{"name": str}``; ``{"op": "authenticate", "credential": str}`` ->
  ``{"identity": {"sub", "groups", "name"?, "ttl_secs"?}}`` | ``{"reject": {"message"}}`` |
  ``{"pass": true}`` (not mine: try the next chain module).
* store: ``{"op": <operation>, "args": {...}}`` -> ``{"result": <JSON>}`` |
  ``{"error": {"kind", "message"}}``; the operation vocabulary belongs to the kernel's store
  subsystem (snake_cased: ``put_key``, ``get_key``, ``list_keys``, ``add_usage``,
  ``append_audit``, ...).

Source: docs/config-at-a-glance.md#store, docs/config-at-a-glance.md#auth, docs/config-at-a-glance.md#providers (``{
module: <secret-plugin> }``); docs/stores.md#the-plugin-wire.
"""
from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AuthPass",
    "AuthReject",
    "AuthenticateMessage",
    "Identity",
    "NameMessage",
    "ResolveMessage",
    "SecretFailure",
    "SecretValue",
    "StoreFailure",
    "StoreMessage",
    "StoreResult",
]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResolveMessage(_Wire):
    """Resolve one ``{ module: <secret-plugin>, settings: {...} }`` reference."""

    op: Literal["resolve"] = "resolve"
    settings: dict[str, Any] = Field(default_factory=dict)
    deadline_ms: int = 5000


class SecretValue(_Reply):
    """The resolved secret; ``bytes`` travel base64-encoded as ``value_b64``. Redacted in repr."""

    value: str | bytes = Field(repr=False)

    def to_wire(self) -> dict[str, Any]:
        if isinstance(self.value, bytes):
            return {"value_b64": base64.b64encode(self.value).decode("ascii")}
        return {"value": self.value}


class SecretFailure(_Reply):
    """``{"error": {"kind": "not_found"|"denied"|"unavailable"|..., "message"}}``."""

    kind: str = "unavailable"
    message: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"error": {"kind": self.kind, "message": self.message}}


class NameMessage(_Wire):
    """Ask an auth module for its runtime module name (role bindings are keyed by it)."""

    op: Literal["name"] = "name"


class AuthenticateMessage(_Wire):
    """Verify one presented credential (the bearer token). Redacted in repr."""

    op: Literal["authenticate"] = "authenticate"
    credential: str = Field(repr=False)


class Identity(_Reply):
    """A verified caller: subject, asserted roles/groups, optional display name and cache TTL (s)."""

    sub: str
    groups: tuple[str, ...] = ()
    name: str | None = None
    ttl_secs: int | None = None

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"sub": self.sub, "groups": list(self.groups)}
        if self.name is not None:
            body["name"] = self.name
        if self.ttl_secs is not None:
            body["ttl_secs"] = self.ttl_secs
        return {"identity": body}


class AuthReject(_Reply):
    """The credential is this module's and it is invalid: stop the chain with 401."""

    message: str = "invalid credential"

    def to_wire(self) -> dict[str, Any]:
        return {"reject": {"message": self.message}}


class AuthPass(_Reply):
    """Not this module's credential: the chain tries the next module."""

    def to_wire(self) -> dict[str, Any]:
        return {"pass": True}


class StoreMessage(_Wire):
    """One store operation with its keyword arguments."""

    op: str
    args: dict[str, Any] = Field(default_factory=dict)


class StoreResult(_Reply):
    """``{"result": <JSON-compatible value>}``."""

    result: Any = None

    def to_wire(self) -> dict[str, Any]:
        return {"result": self.result}


class StoreFailure(_Reply):
    """``{"error": {"kind", "message"}}``; ``kind: unsupported`` for an unknown operation."""

    kind: str
    message: str

    def to_wire(self) -> dict[str, Any]:
        return {"error": {"kind": self.kind, "message": self.message}}
