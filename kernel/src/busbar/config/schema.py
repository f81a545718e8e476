"""Typed models of providers.yaml and config.yaml (pydantic v2, unknown keys rejected everywhere).

Defaults are exactly seed 001's. Cross-reference checks (a member naming a missing model,
fallback-pool cycles, …) live in ``busbar.config.validate``; this module only types shapes.

Source: seeds 001 "providers.yaml", "config.yaml" and every subsection.
"""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from busbar.config.schema_plugins import PluginsConfig

PROTOCOLS = ("anthropic", "openai", "gemini", "bedrock", "responses", "cohere")
AUTH_STYLES = ("bearer", "api-key", "jwt-bearer", "oauth-client-credentials")
DISPOSITION_CLASSES = ("rate_limit", "overloaded", "server_error", "timeout", "network", "auth",
                       "billing", "client_error", "context_length")
STRATEGIES = ("weighted", "cheapest", "fastest", "least_busy", "usage")


class Strict(BaseModel):
    """Base: unknown keys are faults at every level (typo fail-closed)."""

    model_config = ConfigDict(extra="forbid", frozen=False)


# ---------------------------------------------------------------- secrets


class EnvRef(Strict):
    env: str


class FileRef(Strict):
    file: str


class ModuleRef(Strict):
    module: str
    settings: dict[str, Any] = Field(default_factory=dict)


SecretRef = Union[EnvRef, FileRef, ModuleRef]


# ---------------------------------------------------------------- providers


class HealthConfig(Strict):
    """``health:`` — seeds 001 "Health probing". Intervals floored at 1 s at use."""

    mode: Literal["none", "dead", "active"] = "none"
    interval_secs: int = 30
    timeout_secs: int = 5


class CatalogProvider(Strict):
    """One providers.yaml entry — seeds 001 "Catalog fields"."""

    protocol: str = "anthropic"
    base_url: str
    error_map: dict[str, str] = Field(default_factory=dict)
    path: str | None = None
    path_base: str | None = None
    auth: str | None = None
    token_url: str | None = None
    scope: str | None = None
    subject: str | None = None
    health: HealthConfig | None = None


class DeploymentProvider(Strict):
    """A config.yaml ``providers:`` entry: the credential plus selective catalog overrides."""

    api_key: SecretRef
    protocol: str | None = None
    base_url: str | None = None
    error_map: dict[str, str] = Field(default_factory=dict)
    path: str | None = None
    path_base: str | None = None
    auth: str | None = None
    token_url: str | None = None
    scope: str | None = None
    subject: str | None = None
    health: HealthConfig | None = None
    allow_metadata_hosts: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- models and pools


class ModelConfig(Strict):
    """A lane — seeds 001 "models"."""

    provider: str
    max_concurrent: int | None = None
    max_requests: int = -1
    default_max_tokens: int | None = None
    upstream_model: str | None = None
    attempt_timeout_ms: int | None = None
    reasoning: bool = False
    prompt_caching: bool = False


class MemberConfig(Strict):
    """A pool member — seeds 001 "Members and weights"."""

    model: str
    weight: int = 1
    context_max: int | None = None
    attempt_timeout_ms: int | None = None
    reasoning: bool | None = None
    tier: str | None = None
    tags: list[str] = Field(default_factory=list)


class TripConfig(Strict):
    mode: Literal["error_rate", "consecutive"] = "error_rate"
    window_secs: int = 30
    threshold: float = 0.5
    min_requests: int = 5
    consecutive_n: int = 3


class BreakerConfig(Strict):
    """``breaker:`` — seeds 001 "breaker". Defaults match ADR-0002."""

    trip: TripConfig = Field(default_factory=TripConfig)
    base_cooldown_secs: int = 15
    max_cooldown_secs: int = 120


class FailoverConfig(Strict):
    """``failover:`` — seeds 001 "failover"."""

    timeout_secs: int = 120
    max_hops: int = 3
    exclusions: list[str] = Field(default_factory=list)


class AffinityConfig(Strict):
    mode: str = "session"
    header_name: str = "x-session-id"


class FallbackPool(Strict):
    fallback_pool: str


_ON_EXHAUSTED_ALIASES = {
    "reject": "reject", "status_503": "reject", "status503": "reject", "503": "reject",
    "least_bad": "least_bad", "least-bad": "least_bad", "leastbad": "least_bad",
}


class HookRef(Strict):
    """An inline hook module ref — seeds 001 "Pool hooks", seeds 003."""

    module: str
    settings: dict[str, Any] = Field(default_factory=dict)
    kind: Literal["tap", "gate"] | None = None
    timeout_ms: int = 1
    on_error: Union[str, dict[str, str]] = "nothing"
    on_empty: Literal["reject", "weighted"] = "reject"
    prompt: Literal["no", "ro", "rw"] = "no"
    user: Literal["no", "ro"] = "no"
    priority: int = 0
    at: Literal["request", "route", "attempt", "completion"] = "request"


class PoolConfig(Strict):
    """A pool — seeds 001 "pools"."""

    members: list[MemberConfig]
    hooks: list[Union[str, HookRef]] = Field(default_factory=list)
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    failover: FailoverConfig = Field(default_factory=FailoverConfig)
    on_exhausted: Union[str, int, FallbackPool] = "reject"
    affinity: AffinityConfig | None = None

    @field_validator("on_exhausted", mode="before")
    @classmethod
    def _normalize_on_exhausted(cls, v: Any) -> Any:
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            key = str(v).strip().lower()
            if key in _ON_EXHAUSTED_ALIASES:
                return _ON_EXHAUSTED_ALIASES[key]
            raise ValueError(f"'{v}' is not reject, least_bad or {{ fallback_pool: <pool> }}")
        return v


# ---------------------------------------------------------------- limits, observability, misc


class ReasoningBudgets(Strict):
    minimal: int = 1024
    low: int = 4096
    medium: int = 8192
    high: int = 16384


class LimitsConfig(Strict):
    """``limits:`` — seeds 001 "limits" (thirteen operational limits + the effort table)."""

    max_inbound_concurrent: int = 8192
    request_body_max_bytes: int = 33554432
    upstream_request_timeout_secs: int = 300
    tls_handshake_timeout_secs: int = 10
    request_body_read_timeout_secs: int = 30
    pool_max_idle_per_host: int = 1024
    pool_idle_timeout_secs: int = 300
    hard_down_cooldown_secs: int = 1800
    upstream_error_body_max_bytes: int = 262144
    max_honored_retry_after_secs: int = 86400
    default_max_tokens: int = 4096
    max_keys_per_principal: int = 0
    max_auto_provisioned_groups: int = 0
    reasoning_effort_budgets: ReasoningBudgets = Field(default_factory=ReasoningBudgets)
    stream_keepalive_secs: float = 15.0


class ObservabilityConfig(Strict):
    otlp_url: str | None = None
    request_log_webhook_url: str | None = None
    emit_server_timing: bool = False
    max_inflight_webhook_deliveries: int = 64
    webhook_delivery_timeout_secs: int = 2


class MetricsConfig(Strict):
    buffer_seconds: int


class TlsConfig(Strict):
    cert: SecretRef
    key: SecretRef
    client_ca: SecretRef | None = None


class SecurityConfig(Strict):
    blocked_metadata_hosts: list[str] = Field(default_factory=list)
    allow_metadata_hosts: list[str] = Field(default_factory=list)
    allow_all_metadata: bool = False


class StoreConfig(Strict):
    module: str = "memory"
    settings: dict[str, Any] = Field(default_factory=dict)


class GroupLimit(Strict):
    requests: int | None = None
    tokens: int | None = None
    budget: int | None = None
    concurrent: int | None = None
    per: Literal["minute", "hour", "day", "month", "total"] | None = None
    pool: str | None = None
    on_exhaust: Literal["block", "downgrade"] | None = None
    downgrade_to: str | None = None


class ChildDefault(Strict):
    limits: list[GroupLimit] = Field(default_factory=list)


class GroupConfig(Strict):
    parent: str | None = None
    enabled: bool = True
    limits: list[GroupLimit] = Field(default_factory=list)
    child_default: ChildDefault | None = None


class RateCardEntry(Strict):
    input_utok: float = 0.0
    output_utok: float = 0.0
    cache_read_utok: float = 0.0
    cache_write_utok: float = 0.0


class RoleBinding(Strict):
    allowed_pools: list[str] | None = None
    group: str | None = None
    admin_scope: Literal["read-only", "hooks-register", "mint", "full"] | None = None


class AuthConfig(Strict):
    """``auth:`` — seeds 001 "auth". Chain modules arrive with governance; shapes are typed now."""

    signing_key: SecretRef | None = None
    upstream_credentials: Literal["own", "passthrough"] = "own"
    chain: list[Union[str, dict[str, dict[str, Any]]]] = Field(default_factory=list)
    admin_auth: list[Union[str, dict[str, dict[str, Any]]]] = Field(
        default_factory=lambda: ["admin-tokens"])
    role_bindings: dict[str, dict[str, RoleBinding]] = Field(default_factory=dict)


class DeploymentConfig(Strict):
    """The whole config.yaml. ``providers`` and ``models`` are the only required sections."""

    listen: str = "0.0.0.0:8080"
    admin_listen: str = "127.0.0.1:8081"
    admin_insecure: bool = False
    tls: TlsConfig | None = None
    admin_tls: TlsConfig | None = None
    auth: AuthConfig = Field(default_factory=AuthConfig)
    groups: dict[str, GroupConfig] = Field(default_factory=dict)
    rate_card: dict[str, RateCardEntry] | None = None
    per_request_fee: int = 0
    store: StoreConfig = Field(default_factory=StoreConfig)
    providers: dict[str, DeploymentProvider]
    models: dict[str, ModelConfig]
    pools: dict[str, PoolConfig] = Field(default_factory=dict)
    global_hooks: list[HookRef] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    metrics: MetricsConfig | None = None
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    security: SecurityConfig = Field(default_factory=SecurityConfig)

    @model_validator(mode="before")
    @classmethod
    def _null_sections(cls, data: Any) -> Any:
        # An empty YAML section (`pools:` with nothing under it) parses as None: treat as absent.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k in ("rate_card",)}
        return data
