"""The key service: mint, list, get, patch, revoke, rotate and delete virtual keys through the store.

Keys are pure auth: the store holds the binding (:class:`busbar_sdk.store.VirtualKey`), never the
token. The ``bbk_`` token is made by the token codec (``await issue(sub, exp, generation) -> str``) and
returned only by :meth:`KeyService.mint` and :meth:`KeyService.rotate`.

- **mint**: ``group`` must be a configured or runtime group (400), unless ``parent`` names an
  existing group: then the group is auto-provisioned under it (limits from the nearest
  ``child_default``) within ``limits.max_auto_provisioned_groups`` (409 over it). An existing group
  with a different parent is a 409 (a mint never re-homes). ``limits.max_keys_per_principal`` caps
  the live keys bound to one group, the unbound bucket included (409). ``expires_in`` (a duration)
  and ``expires_at`` (Unix seconds) are exclusive; the default lifetime is 90 days.
  ``issue_aws_credential`` stores a ``sigv4`` credential and returns its pair once.
- **patch** ``{enabled?, group?}`` (group three-state), **revoke** (denylist; the row stays),
  **rotate** (generation + 1: every older token stops verifying; a new token, and a new AWS pair when
  the key had one, in the other credential slot: the old pair is revoked and stays listed with
  ``revoked_at``), **delete** (tombstone: credentials destroyed, subject denylisted, row kept).

Every mutation takes an optional ETag (``If-Match``; stale: 409 ``version_conflict``), runs under one
lock (the caps are checked and the row written without interleaving), and is audited.

Source: docs/admin.md#keys.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson
from busbar_sdk.store import CredentialMeta, CredentialSecret, Store, StoreError, StoreNotFound, VirtualKey

from busbar.admin.audit import AuditLog
from busbar.admin.durations import parse_duration
from busbar.admin.errors import AdminError
from busbar.admin.models import CredentialView, KeyView, MintRequest, PatchKeyRequest, RotateRequest
from busbar.admin.provision import MAX_DEPTH, NAME_RE, RuntimeGroups, chain_depth, template_for

if TYPE_CHECKING:
    from busbar.config.schema import DeploymentConfig
    from busbar.config.schema_access import GroupConfig

__all__ = ["DEFAULT_LIFETIME_S", "KeyService", "etag_of", "new_aws_pair"]

DEFAULT_LIFETIME_S = 90 * 86400
Issue = Callable[[str, int, int], Awaitable[str]]
_AKID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

log = logging.getLogger("busbar.admin")


def etag_of(key: VirtualKey) -> str:
    """The key's ETag: a quoted 16-hex digest of its stored row (changes on every write)."""
    digest = hashlib.sha256(orjson.dumps(key.to_wire(), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    return f'"{digest}"'


def new_aws_pair() -> tuple[str, str]:
    """A fresh ``(access key id, secret access key)``: ``BBAK`` + 16 base32 characters, 40 characters."""
    akid = "BBAK" + "".join(secrets.choice(_AKID_ALPHABET) for _ in range(16))
    secret = base64.b64encode(secrets.token_bytes(30)).decode()
    return akid, secret


def check_if_match(if_match: str | None, key: VirtualKey) -> None:
    """Raise 400 for a malformed ``If-Match``, 409 ``version_conflict`` for a stale one."""
    if if_match is None or if_match.strip() == "*":
        return
    tags = [t.strip().removeprefix("W/") for t in if_match.split(",")]
    if not all(len(t) >= 2 and t.startswith('"') and t.endswith('"') for t in tags):
        raise AdminError("invalid_request", "If-Match must be a quoted ETag (as returned in the ETag header) or *")
    if etag_of(key) not in tags:
        raise AdminError("version_conflict", f"key '{key.id}' changed since that ETag was read; GET it again "
                                             f"and retry with the new ETag")


class KeyService:
    """Key lifecycle over ``store`` (see the module docstring).

    Args:
        store: the opened store.
        audit: where mutations are recorded.
        runtime_groups: the auto-provisioned groups.
        config: returns the running config (read on every call, so a reload applies).
        issue: the token codec, ``await issue(sub, exp, generation) -> "bbk_..."``.
        clock: Unix seconds.
        refresh: ``await refresh()`` pulls the store's changes into this node's key mirror
            (``KeySync.sync``) after a revoke, rotate or delete, so the node that made the change
            refuses the old credential at once instead of at its next sync; ``None``: nothing.
    """

    def __init__(self, store: Store, audit: AuditLog, runtime_groups: RuntimeGroups,
                 config: Callable[[], DeploymentConfig], issue: Issue, clock: Callable[[], float] = time.time,
                 refresh: Callable[[], Awaitable[None]] | None = None):
        self._refresh = refresh
        self.store = store
        self.audit = audit
        self.runtime = runtime_groups
        self._config = config
        self._issue = issue
        self._clock = clock
        self._lock = asyncio.Lock()

    # -- reads -------------------------------------------------------------------------------
    def groups(self) -> dict[str, GroupConfig]:
        """Configured groups overlaid with the runtime ones."""
        return {**self.runtime.all(), **self._config().groups}

    async def _denied(self) -> set[str]:
        return {d.sub for d in await self.store.list_denylist()}

    def _state(self, key: VirtualKey, denied: set[str], now: int) -> str:
        if key.deleted_at is not None:
            return "tombstoned"
        if key.id in denied:
            return "revoked"
        if key.expires_at is not None and key.expires_at <= now:
            return "expired"
        return "active" if key.enabled else "disabled"

    async def view(self, key: VirtualKey, denied: set[str] | None = None) -> KeyView:
        """The metadata view of ``key`` (credentials listed without secrets)."""
        if denied is None:
            denied = await self._denied()
        creds = [CredentialView(id=c.id, kind=c.kind, public_id=c.public_id, created_at=c.created_at,
                                expires_at=c.expires_at, revoked_at=c.revoked_at)
                 for c in await self.store.list_credentials(key.id)] if key.deleted_at is None else []
        return KeyView(id=key.id, name=key.name, state=self._state(key, denied, int(self._clock())),
                       enabled=key.enabled, group=key.group, allowed_pools=key.allowed_pools,
                       labels=dict(key.labels), created_at=key.created_at, expires_at=key.expires_at,
                       deleted_at=key.deleted_at, generation=key.generation, credentials=creds)

    async def get(self, key_id: str) -> VirtualKey:
        """The stored row; raises 404 ``not_found``."""
        key = await self.store.get_key(key_id)
        if key is None:
            raise AdminError("not_found", f"no key '{key_id}'")
        return key

    async def page(self, *, group: str | None = None, enabled: bool | None = None, prefix: str | None = None,
                   include_tombstoned: bool = False, after: str | None = None, limit: int = 200
                   ) -> tuple[list[KeyView], str | None]:
        """Keys ordered by id after ``after`` (the cursor), filtered; returns ``(items, next id or None)``."""
        denied = await self._denied()
        rows = sorted(await self.store.list_keys(), key=lambda k: k.id)
        picked = [k for k in rows
                  if (after is None or k.id > after)
                  and (include_tombstoned or k.deleted_at is None)
                  and (group is None or k.group == group)
                  and (enabled is None or k.enabled == enabled)
                  and (prefix is None or k.name.startswith(prefix) or k.id.startswith(prefix))]
        page = picked[:limit]
        more = len(picked) > limit
        return [await self.view(k, denied) for k in page], (page[-1].id if more and page else None)

    # -- helpers -----------------------------------------------------------------------------
    def _expiry(self, expires_in: str | None, expires_at: int | None, now: int) -> int:
        if expires_in is not None and expires_at is not None:
            raise AdminError("invalid_request", "expires_in and expires_at are mutually exclusive; send one")
        if expires_in is not None:
            try:
                return now + parse_duration(expires_in)
            except ValueError as e:
                raise AdminError("invalid_request", f"expires_in: {e}") from None
        if expires_at is not None:
            if expires_at <= now:
                raise AdminError("invalid_request", f"expires_at: {expires_at} is not in the future (now is {now})")
            return expires_at
        return now + DEFAULT_LIFETIME_S

    async def _live_bound(self, group: str | None, denied: set[str], now: int, *, skip: str = "") -> int:
        return sum(1 for k in await self.store.list_keys()
                   if k.group == group and k.id != skip and self._state(k, denied, now) == "active")

    async def _check_cap(self, group: str | None, now: int, *, skip: str = "") -> None:
        cap = self._config().limits.max_keys_per_principal
        if cap <= 0:
            return
        bound = await self._live_bound(group, await self._denied(), now, skip=skip)
        if bound >= cap:
            where = f"group '{group}'" if group is not None else "the unbound bucket (no group)"
            raise AdminError("conflict", f"{where} already has {bound} live key(s), the "
                                         f"limits.max_keys_per_principal cap; revoke or delete one first")

    async def _resolve_group(self, group: str | None, parent: str | None, now: int) -> tuple[str | None, bool]:
        """``(group, needs provisioning)``; raises 400 / 409 per the mint rules."""
        if group is None:
            if parent is not None:
                raise AdminError("invalid_request", "parent needs group: name the group to bind "
                                                    "(auto-provisioned under parent when it does not exist)")
            return None, False
        groups = self.groups()
        if group in groups:
            actual = groups[group].parent
            if parent is not None and parent != actual:
                raise AdminError("conflict", f"group '{group}' exists with parent "
                                             f"{repr(actual) if actual else 'none'}, not '{parent}'; a mint never "
                                             f"re-homes a group (omit parent or name its actual parent)")
            return group, False
        if parent is None:
            raise AdminError("invalid_request", f"group '{group}' is not a configured group; add it under "
                                                f"groups:, or pass parent to auto-provision it")
        if parent not in groups:
            raise AdminError("invalid_request", f"parent '{parent}' is not a configured group; name an "
                                                f"existing group")
        if not NAME_RE.match(group):
            raise AdminError("invalid_request", f"group '{group}' is not a valid group name (letters, digits "
                                                f"and _ . : @ + -, starting with a letter or digit)")
        if chain_depth(parent, groups) + 1 > MAX_DEPTH:
            raise AdminError("invalid_request", f"group '{group}' under '{parent}' would make a chain deeper "
                                                f"than {MAX_DEPTH}; choose a parent nearer the root")
        cap = self._config().limits.max_auto_provisioned_groups
        if cap > 0 and len(self.runtime) >= cap:
            raise AdminError("conflict", f"{len(self.runtime)} group(s) have been auto-provisioned, the "
                                         f"limits.max_auto_provisioned_groups cap; bind to an existing group")
        return group, True

    def _pool_warnings(self, pools: list[str] | None) -> list[str]:
        cfg = self._config()            # a model or an ad-hoc route's provider is a grant too (docs/auth.md)
        return [f"allowed_pools: '{p}' is not a configured pool (the key cannot reach it until it is)"
                for p in pools or [] if p not in cfg.pools and p not in cfg.models and p not in cfg.providers]

    async def _issue_aws(self, key: VirtualKey, now: int, slot: int = 0) -> tuple[str, str]:
        akid, secret = new_aws_pair()
        meta = CredentialMeta(id="cred_" + secrets.token_hex(8), key_id=key.id, kind="sigv4", slot=slot,
                              public_id=akid, created_at=now, expires_at=key.expires_at)
        await self.store.put_credential(CredentialSecret(meta, "v1:plain:" + secret))
        return akid, secret

    def _reply(self, view: KeyView, token: str, aws: tuple[str, str] | None, warnings: list[str]) -> dict[str, Any]:
        body = view.model_dump(mode="json")
        body["token"] = token
        if aws is not None:
            body["aws_access_key_id"], body["aws_secret_access_key"] = aws
        body["warnings"] = warnings
        return body

    # -- mutations ---------------------------------------------------------------------------
    async def mint(self, req: MintRequest, principal: str) -> dict[str, Any]:
        """Mint a key; the reply holds ``token`` (and the AWS pair) once. Raises :class:`AdminError`."""
        now = int(self._clock())
        exp = self._expiry(req.expires_in, req.expires_at, now)
        labels = dict(req.labels or {})
        async with self._lock:
            group, provision = await self._resolve_group(req.group, req.parent, now)
            await self._check_cap(group, now)
            if provision and group is not None and req.parent is not None:
                groups = self.groups()
                await self.runtime.add(group, req.parent, template_for(req.parent, groups), now)
                await self.audit.append("group.provision", f"group/{group}", "ok", principal)
            key = VirtualKey(id="vk_" + secrets.token_hex(12), name=req.name, created_at=now,
                             allowed_pools=list(req.allowed_pools) if req.allowed_pools is not None else None,
                             group=group, labels=labels, expires_at=exp)
            key = await self.store.put_key(key)
            aws = await self._issue_aws(key, now) if req.issue_aws_credential else None
            token = await self._issue(key.id, exp, key.generation)
            await self.audit.append("key.mint", f"key/{key.id}", "ok", principal)
        return self._reply(await self.view(key), token, aws, self._pool_warnings(key.allowed_pools))

    async def _mutable(self, key_id: str, if_match: str | None, what: str) -> VirtualKey:
        key = await self.get(key_id)
        check_if_match(if_match, key)
        if key.deleted_at is not None:
            raise AdminError("conflict", f"key '{key_id}' is deleted; it cannot be {what}")
        return key

    async def patch(self, key_id: str, req: PatchKeyRequest, if_match: str | None, principal: str) -> VirtualKey:
        """Freeze/unfreeze and rebind/unbind (three-state ``group``). Raises :class:`AdminError`."""
        sent = req.model_fields_set
        now = int(self._clock())
        async with self._lock:
            key = await self._mutable(key_id, if_match, "changed")
            if key.id in await self._denied():
                raise AdminError("conflict", f"key '{key_id}' is revoked; a revoked key cannot be changed "
                                             f"(mint a new one)")
            changed = key
            if "group" in sent and req.group != key.group:
                if req.group is not None and req.group not in self.groups():
                    raise AdminError("invalid_request", f"group '{req.group}' is not a configured group; add it "
                                                        f"under groups: or fix the name")
                await self._check_cap(req.group, now, skip=key.id)
                changed = replace(changed, group=req.group)
            if "enabled" in sent and req.enabled is not None:
                changed = replace(changed, enabled=req.enabled)
            elif "enabled" in sent:
                raise AdminError("invalid_request", "enabled: must be true or false")
            if changed != key:
                changed = await self.store.put_key(changed)
            await self.audit.append("key.patch", f"key/{key.id}", "ok", principal)
        return changed

    async def revoke(self, key_id: str, reason: str, if_match: str | None, principal: str) -> VirtualKey:
        """Denylist the key's subject (idempotent) and revoke its credentials; the row stays."""
        now = int(self._clock())
        async with self._lock:
            key = await self._mutable(key_id, if_match, "revoked")
            await self.store.add_denylist(key.id, reason, now)
            for cred in await self.store.list_credentials(key.id):
                if cred.revoked_at is None:
                    await self.store.revoke_credential(cred.id, reason, now)
            await self.audit.append("key.revoke", f"key/{key.id}", "ok", principal)
        await self._refreshed()
        return key

    async def rotate(self, key_id: str, req: RotateRequest, if_match: str | None, principal: str) -> dict[str, Any]:
        """A new token (generation + 1; older tokens stop verifying) and a new AWS pair when the key
        had one. Raises :class:`AdminError` (409 for a revoked or deleted key)."""
        now = int(self._clock())
        async with self._lock:
            key = await self._mutable(key_id, if_match, "rotated")
            if key.id in await self._denied():
                raise AdminError("conflict", f"key '{key_id}' is revoked; a revoked key cannot be rotated "
                                             f"(mint a new one)")
            keep = key.expires_at if key.expires_at is not None and key.expires_at > now else None
            exp = self._expiry(req.expires_in, req.expires_at, now) if (
                req.expires_in is not None or req.expires_at is not None or keep is None) else keep
            key = await self.store.put_key(replace(key, generation=key.generation + 1, expires_at=exp))
            aws = None
            live = [c for c in await self.store.list_credentials(key.id) if c.kind == "sigv4" and c.revoked_at is None]
            for cred in live:
                await self.store.revoke_credential(cred.id, "rotated", now)
            if live:
                # the other slot: the revoked row stays in the store (listed with revoked_at) and its
                # revocation reaches every node's mirror as a delta
                aws = await self._issue_aws(key, now, slot=1 - live[0].slot)
            token = await self._issue(key.id, exp, key.generation)
            await self.audit.append("key.rotate", f"key/{key.id}", "ok", principal)
        await self._refreshed()
        return self._reply(await self.view(key), token, aws, [])

    async def delete(self, key_id: str, if_match: str | None, principal: str) -> VirtualKey:
        """Tombstone (credentials destroyed, subject denylisted, row kept for attribution)."""
        now = int(self._clock())
        async with self._lock:
            key = await self.get(key_id)
            check_if_match(if_match, key)
            try:
                key = await self.store.delete_key(key.id, now)
            except StoreNotFound:
                raise AdminError("not_found", f"no key '{key_id}'") from None
            await self.store.add_denylist(key.id, "deleted", now)
            await self.audit.append("key.delete", f"key/{key.id}", "ok", principal)
        await self._refreshed()
        return key

    async def _refreshed(self) -> None:
        """Pull the change into this node's key mirror now (best effort: the sync loop retries)."""
        if self._refresh is None:
            return
        try:
            await self._refresh()
        except StoreError:
            log.warning("key mirror refresh after an admin change failed; the sync loop will retry")

    def config_groups(self) -> Mapping[str, GroupConfig]:
        """The configured groups only (for callers that need to tell them from runtime ones)."""
        return self._config().groups
