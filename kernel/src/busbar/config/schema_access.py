"""Models of ``auth:``, ``groups:`` and ``rate_card:``: who may call, what they may spend, at what price.

Shapes and defaults only; the cross-references (a role bound to a missing group, a parent that does
not exist, a group-tree cycle, a rate card missing a model, a chain module that is not loadable) are
``busbar.config.validate_auth`` and ``validate_groups``.

An ``auth.chain`` / ``auth.admin_auth`` entry is written either as a bare module name (``- keys``) or
as a single-key map (``- ad: { max_admin_scope: full, settings: {...} }``); :meth:`AuthConfig.modules`
gives both spellings one typed view, :class:`AuthModule`.

Source: docs/config-at-a-glance.md#auth, docs/config-at-a-glance.md#groups,
docs/config-at-a-glance.md#rate_card, docs/config-at-a-glance.md#per_request_fee.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, field_validator

from busbar.config.schema_base import BUILTIN_ADMIN_MODULE, SecretRef, Strict, tagged_union

AdminScope = Literal["read-only", "hooks-register", "mint", "full"]


class AuthEntryBody(Strict):
    """The typed fields of a chain entry, beside the module's own opaque ``settings``."""

    max_admin_scope: AdminScope = "read-only"
    """Ceiling on the admin scope obtainable through this module (read-only | hooks-register | mint |
    full); the built-in admin-tokens operator credential is exempt: set on it (or on keys) it is
    refused, as is settings: on either built-in."""
    token: SecretRef | None = None
    """The operator admin credential: built-in admin-tokens module only (a secret reference)."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """The auth module's own opaque configuration, passed to the plugin verbatim."""


AUTH_ENTRY_HINT = ("must be a module name (- keys) or a single-key map "
                   "(- <module>: { max_admin_scope?, settings?, token? })")


def _bare_or_map(v: Any) -> str | None:
    if isinstance(v, str):
        return "~bare"
    if isinstance(v, dict):
        return "~entry"
    return None


def _none_bodies(v: Any) -> Any:
    # `- keys:` (a module with nothing under it) parses as {keys: None}: the same as the bare name.
    if isinstance(v, list):
        return [{k: ({} if b is None else b) for k, b in e.items()} if isinstance(e, dict) else e
                for e in v]
    return v


if TYPE_CHECKING:
    AuthEntry = Union[str, dict[str, AuthEntryBody]]
else:
    AuthEntry = tagged_union({"~bare": str,
                              "~entry": Annotated[dict[str, AuthEntryBody], Field(min_length=1, max_length=1)]},
                             _bare_or_map,
                             error="auth_entry", message=AUTH_ENTRY_HINT)


@dataclass(frozen=True)
class AuthModule:
    """One chain entry, either spelling: ``name`` plus its typed fields (defaults when bare)."""

    name: str
    max_admin_scope: str = "read-only"
    token: Any = None
    settings: dict[str, Any] = field(default_factory=dict)
    given: frozenset[str] = frozenset()
    """The typed fields the entry spells out (``max_admin_scope``, ``token``, ``settings``)."""


class RoleBinding(Strict):
    """``auth.role_bindings.<module>.<role>``: what a role asserted by that module earns."""

    allowed_pools: list[str] | None = None
    """Data-plane grant: pools this role may target. OMITTED = ALL pools; [] = NO pools."""
    group: str | None = None
    """The groups: bucket the role's principals charge through; absent = no group (unlimited)."""
    admin_scope: AdminScope | None = None
    """Admin authority granted: read-only | hooks-register | mint | full; absent = none."""


class AuthConfig(Strict):
    """``auth:`` front-door identity (data-plane chain), the admin chain and module-scoped roles."""

    signing_key: SecretRef | None = None
    """ed25519 key signing virtual keys (fleet-shared). Absent = generated on first boot (0600)."""
    upstream_credentials: Literal["own", "passthrough"] = "own"
    """own: Busbar's lane credential hits the provider; passthrough: the caller's token is forwarded."""
    chain: list[AuthEntry] = Field(default_factory=list)
    """Ordered data-plane auth chain: keys (built-in signed-key verifier) or kind: auth plugins.
    [] = open front door (development only; warned)."""
    admin_auth: list[AuthEntry] = Field(default_factory=lambda: [BUILTIN_ADMIN_MODULE])  # type: ignore[arg-type]
    """Chain gating /api/v1/admin/*; admin-tokens carries the operator token. [] = OPEN admin."""
    role_bindings: dict[str, dict[str, RoleBinding]] = Field(default_factory=dict)
    """Role policy nested by module: role_bindings.<module>.<role> -> { allowed_pools?, group?,
    admin_scope? }. An unbound role grants nothing."""

    @field_validator("chain", "admin_auth", mode="before")
    @classmethod
    def _bare_bodies(cls, v: Any) -> Any:
        return _none_bodies(v)

    @staticmethod
    def module(entry: Any) -> AuthModule:
        """The typed view of one ``chain`` / ``admin_auth`` entry."""
        if isinstance(entry, str):
            return AuthModule(entry)
        (name, body), = entry.items()
        return AuthModule(name, body.max_admin_scope, body.token, dict(body.settings), frozenset(body.model_fields_set))

    def modules(self, which: Literal["chain", "admin_auth"]) -> list[AuthModule]:
        """Every entry of ``chain`` or ``admin_auth`` as :class:`AuthModule`, in order."""
        return [self.module(e) for e in getattr(self, which)]


class GroupLimit(Strict):
    """One limit: exactly one metric key; windowed metrics need ``per:``; ``concurrent`` takes none."""

    requests: int | None = None
    """Requests per window (precise, counted at admission)."""
    tokens: int | None = None
    """Tokens per window (post-paid, best effort)."""
    budget: int | None = None
    """Spend per window in micro-units (tokens × rate_card + billable requests × per_request_fee)."""
    concurrent: int | None = None
    """In-flight cap (instantaneous; no per:, no pool:)."""
    per: Literal["minute", "hour", "day", "month", "total"] | None = None
    """Window of a requests/tokens/budget limit (required for those)."""
    pool: str | None = None
    """Scope a windowed limit to one pool's traffic (its own bucket); the pool must exist."""
    on_exhaust: Literal["block", "downgrade"] | None = None
    """What exhaustion does: block (default: vendor quota status) or downgrade (pool-scoped budget
    limits only; needs downgrade_to)."""
    downgrade_to: str | None = None
    """With on_exhaust: downgrade: the different, existing pool to re-admit through."""
    shadow: bool | None = None
    """true: evaluated, logged and counted (busbar_limit_shadow_rejections_total), never enforced."""
    strict: bool | None = None
    """true (requests or budget limits only): fleet-exact, admitted by one atomic operation in the
    shared store (docs/limits.md#strict-mode); a store failure then refuses the request (503)."""

    def metrics(self) -> list[str]:
        """The metric keys set on this limit (exactly one in a valid config)."""
        return [m for m in ("requests", "tokens", "budget", "concurrent") if getattr(self, m) is not None]


class ChildDefault(Strict):
    """``child_default:`` the limit template stamped onto auto-provisioned child groups."""

    limits: list[GroupLimit] = Field(default_factory=list)
    """Same shape as a group's limits."""


class GroupConfig(Strict):
    """``groups.<name>``: an enforcement bucket in the one limit tree."""

    parent: str | None = None
    """Parent group (must exist; the chain must be acyclic and at most 8 groups deep)."""
    enabled: bool = True
    """false FREEZES this group and every descendant (403 naming the group); usage is kept."""
    limits: list[GroupLimit] = Field(default_factory=list)
    """Limits ANDed with every ancestor's at admission."""
    child_default: ChildDefault | None = None
    """Template for children auto-provisioned under this group (nearest ancestor wins)."""


class RateCardEntry(Strict):
    """``rate_card.<model>``: per-token rates in micro-units (1e-6 abstract cost unit); omitted tier = 0."""

    input_utok: float = 0.0
    """Input (prompt) tokens."""
    output_utok: float = 0.0
    """Output (completion) tokens."""
    cache_read_utok: float = 0.0
    """Cache-read tokens."""
    cache_write_utok: float = 0.0
    """Cache-write tokens."""
    per_image_utok: float = 0.0
    """Per generated image (images operation; docs/beyond-chat.md#usage)."""
    per_audio_second_utok: float = 0.0
    """Per second of transcribed/translated audio (audio operation)."""
    per_character_utok: float = 0.0
    """Per input character of speech synthesis (audio operation)."""
    per_search_unit_utok: float = 0.0
    """Per rerank search unit (rerank operation). Embeddings are priced by ``input_utok``."""
