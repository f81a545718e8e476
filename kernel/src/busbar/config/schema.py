"""The one typed model of config.yaml (:class:`DeploymentConfig`) and providers.yaml (:class:`Catalog`).

Every section and key of docs/configuration.md parses into these pydantic v2 models; unknown keys are rejected at
every level and values are never coerced. Defaults are exactly docs/configuration.md's. Section models live in
``schema_providers`` / ``schema_pools`` / ``schema_access`` / ``schema_ops`` and are re-exported here,
so ``from busbar.config.schema import PoolConfig`` keeps working for the runtime.

What must not live here: cross-reference checks (a member naming a missing model, fallback cycles,
group-tree faults, SSRF verdicts, ...). Those are ``busbar.config.validate`` and its section modules,
which collect every fault at once.

Shape::

    DeploymentConfig
      listen, admin_listen, admin_insecure, tls, admin_tls          (TlsConfig)
      auth            AuthConfig   chain / admin_auth (AuthEntry), role_bindings (RoleBinding)
      groups          {name: GroupConfig}   limits (GroupLimit), child_default
      rate_card       {model: RateCardEntry} | None,  per_request_fee
      store           StoreConfig
      providers       {name: DeploymentProvider}      (required)
      models          {name: ModelConfig}             (required)
      pools           {name: PoolConfig}   members, hooks (str | HookRef), breaker, failover, ...
      global_hooks    [HookRef]
      limits, observability, metrics, plugins (PluginsConfig), security, advanced

The JSON Schema of both files is :func:`busbar.config.schema_export.config_json_schema`.

Source: docs/configuration.md#sections and every subsection; docs/hooks.md#configuring.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, RootModel, field_validator, model_validator

from busbar.config.schema_access import (
    AuthConfig,
    AuthEntryBody,
    AuthModule,
    ChildDefault,
    GroupConfig,
    GroupLimit,
    RateCardEntry,
    RoleBinding,
)
from busbar.config.schema_base import (
    ADMIN_SCOPES,
    AUTH_STYLES,
    DISPOSITION_CLASSES,
    ON_ERROR_TERMINALS,
    PROTOCOLS,
    STRATEGIES,
    WINDOWS,
    EnvRef,
    FileRef,
    ModuleRef,
    SecretRef,
    Strict,
)
from busbar.config.schema_ops import (
    AdvancedConfig,
    LimitsConfig,
    MetricsConfig,
    ObservabilityConfig,
    ReasoningBudgets,
    SecurityConfig,
    StoreConfig,
    TlsConfig,
)
from busbar.config.schema_plugins import PluginsConfig
from busbar.config.schema_pools import (
    AffinityConfig,
    BreakerConfig,
    FailoverConfig,
    FallbackPool,
    HookEntry,
    HookRef,
    MemberConfig,
    OnErrorHook,
    PoolConfig,
    TripConfig,
)
from busbar.config.schema_providers import CatalogProvider, DeploymentProvider, HealthConfig, ModelConfig

__all__ = [
    "ADMIN_SCOPES", "AUTH_STYLES", "DISPOSITION_CLASSES", "ON_ERROR_TERMINALS", "PROTOCOLS",
    "STRATEGIES", "WINDOWS",
    "AdvancedConfig", "AffinityConfig", "AuthConfig", "AuthEntryBody", "AuthModule", "BreakerConfig",
    "Catalog", "CatalogProvider", "ChildDefault", "DeploymentConfig", "DeploymentProvider", "EnvRef",
    "FailoverConfig", "FallbackPool", "FileRef", "GroupConfig", "GroupLimit", "HealthConfig",
    "HookEntry", "HookRef", "LimitsConfig", "MemberConfig", "MetricsConfig", "ModelConfig",
    "ModuleRef", "ObservabilityConfig", "OnErrorHook", "PluginsConfig", "PoolConfig",
    "RateCardEntry", "ReasoningBudgets", "RoleBinding", "SecretRef", "SecurityConfig", "StoreConfig",
    "Strict", "TlsConfig", "TripConfig",
]


class Catalog(RootModel[dict[str, CatalogProvider]]):
    """providers.yaml: a map of provider name -> :class:`CatalogProvider`."""


class DeploymentConfig(Strict):
    """The whole config.yaml. ``providers`` and ``models`` are the only required sections."""

    listen: str = "0.0.0.0:8080"
    """Data-plane listener, host:port."""
    admin_listen: str = "127.0.0.1:8081"
    """Admin API listener (always its own), host:port. Non-loopback needs admin_tls.client_ca or
    admin_insecure: true."""
    admin_insecure: bool = False
    """Deliberately allow a network-exposed admin_listen without mTLS (not recommended)."""
    tls: TlsConfig | None = None
    """Inbound TLS for the data plane; absent = plain HTTP."""
    admin_tls: TlsConfig | None = None
    """TLS for the admin listener; client_ca gates admin mTLS."""
    auth: AuthConfig = Field(default_factory=AuthConfig)
    """Data-plane auth chain, admin chain, role bindings, signing key."""
    groups: dict[str, GroupConfig] = Field(default_factory=dict)
    """The one limit tree: group name -> parent, enabled, limits, child_default."""
    rate_card: dict[str, RateCardEntry] | None = None
    """The only cost source: model -> per-token micro-unit rates. Absent = every token prices 0;
    present = authoritative and complete (every configured model needs an entry)."""
    per_request_fee: int = Field(default=0, json_schema_extra={"minimum": 0})
    """Flat charge per request in abstract cents (refunded on a non-2xx outcome). ≥ 0."""
    store: StoreConfig = Field(default_factory=StoreConfig)
    """Durable keys/usage/audit/denylist store; absent = ephemeral memory."""
    providers: dict[str, DeploymentProvider]
    """Provider name (a catalog entry, or a new one with base_url) -> credential + overrides."""
    models: dict[str, ModelConfig]
    """Model (lane) name -> provider and lane settings."""
    pools: dict[str, PoolConfig] = Field(default_factory=dict)
    """Pool name -> members, hooks, breaker, failover, on_exhausted, affinity."""
    global_hooks: list[HookEntry] = Field(default_factory=list)
    """Hook refs fired on every request, in order (default kind tap)."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    """Operational limits."""
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    """Trace exporter, request-log webhook, Server-Timing."""
    metrics: MetricsConfig | None = None
    """Prometheus metrics, opt-in (buffer_seconds required)."""
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    """Plugin subsystem: master switch, directory, trust policy, version floors."""
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    """SSRF metadata denylist extensions/overrides."""
    advanced: AdvancedConfig = Field(default_factory=AdvancedConfig)
    """Engine tuning."""

    @model_validator(mode="before")
    @classmethod
    def _null_sections(cls, data: Any) -> Any:
        # An empty YAML section (`pools:` with nothing under it) parses as None: the same as absent.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @field_validator("groups", mode="before")
    @classmethod
    def _empty_groups(cls, v: Any) -> Any:
        # `accounting:` with nothing under it is a group with every default (inherit-only).
        if isinstance(v, dict):
            return {k: ({} if g is None else g) for k, g in v.items()}
        return v
