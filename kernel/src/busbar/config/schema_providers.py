"""Models of providers.yaml entries, config.yaml ``providers:`` overrides and ``models:`` lanes.

Shapes and defaults only; what the values must be (a known protocol, a path starting with ``/``, an
SSRF-safe base_url, ``max_concurrent`` ≥ 1, ...) is ``busbar.config.validate_providers``, so every
such fault is reported together with the others instead of stopping the parse.

Source: docs/config-at-a-glance.md#providersyaml (docs/catalog.md#fields, docs/reliability.md#health-probing),
docs/config-at-a-glance.md#providers, docs/config-at-a-glance.md#models.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from busbar.config.schema_base import SecretRef, Strict


def _str_keys(v: Any) -> Any:
    # `1113: billing` (an unquoted numeric code) is a YAML int key; the code is a string either way.
    if isinstance(v, dict):
        return {str(k) if isinstance(k, int) and not isinstance(k, bool) else k: x for k, x in v.items()}
    return v


class HealthConfig(Strict):
    """``health:`` active probing of a provider's lanes (docs/reliability.md#health-probing)."""

    mode: Literal["none", "dead", "active"] = "none"
    """none: passive (breaker learns from traffic); dead: re-probe tripped lanes only; active: probe
    every lane each interval (one billable request per lane per interval)."""
    interval_secs: int = 30
    """Seconds between probes; floored at 1."""
    timeout_secs: int = 5
    """Per-probe request timeout in seconds; floored at 1."""


class _ProviderFields(Strict):
    """The catalog fields a deployment entry may override (all optional here)."""

    base_url: str | None = None
    """Scheme + host (+ path prefix). https:// for public hosts; http:// only for private/loopback
    hosts; cloud-metadata hosts are refused (SSRF guard). A trailing slash is trimmed."""
    error_map: dict[str, str] = Field(default_factory=dict)
    """Provider JSON error code -> disposition class (rate_limit, overloaded, server_error, timeout,
    network, auth, billing, client_error, context_length). Deployment entries win per code."""
    path: str | None = None
    """Upstream request path appended to base_url (static; must begin with /). Default: the
    protocol's standard path."""
    path_base: str | None = None
    """URL-model protocols (Gemini, Anthropic-on-Vertex): replaces the base segment, the per-request
    suffix is still appended. Must begin with /."""
    auth: str | None = None
    """Egress auth: bearer | api-key | jwt-bearer | oauth-client-credentials. Default: the protocol's
    native scheme."""
    token_url: str | None = None
    """OAuth token endpoint (auth: oauth-client-credentials; required there). https for public hosts."""
    scope: str | None = None
    """OAuth scope (auth: oauth-client-credentials; required there)."""
    subject: str | None = None
    """JWT-bearer ``sub`` claim (auth: jwt-bearer only; opt-in impersonation)."""
    health: HealthConfig | None = None
    """Active health probing; absent = passive only."""

    @field_validator("error_map", mode="before")
    @classmethod
    def _codes_are_strings(cls, v: Any) -> Any:
        return _str_keys(v)


class CatalogProvider(_ProviderFields):
    """One providers.yaml entry: provider name -> wire protocol, base URL, error map."""

    protocol: str = "anthropic"
    """Wire protocol: anthropic | openai | gemini | bedrock | responses | cohere."""
    base_url: str  # type: ignore[assignment]
    """Scheme + host (+ optional path prefix); required in the catalog."""


class DeploymentProvider(_ProviderFields):
    """A config.yaml ``providers:`` entry: the credential plus selective catalog overrides.

    A name absent from the catalog is a provider of its own: it needs ``base_url`` (``protocol``
    defaults to anthropic, as in the catalog).
    """

    api_key: SecretRef
    """The upstream credential as a secret reference ({ env: VAR } / { file: /path } / { module: ... }).
    An unset variable, a missing file or an empty value is a boot error naming it."""
    protocol: str | None = None
    """Override the catalog protocol (rarely needed)."""
    allow_metadata_hosts: list[str] = Field(default_factory=list)
    """Hosts/IPs/CIDRs unblocked from the cloud-metadata SSRF denylist for this provider only."""


class ModelConfig(Strict):
    """A lane: one model at one provider with its own semaphore, lifetime budget and breaker cell."""

    provider: str
    """Name of an entry under providers: (required)."""
    max_concurrent: int | None = Field(default=None, json_schema_extra={"minimum": 1})
    """Max in-flight requests on this lane (semaphore). Omit for unbounded; ≥ 1 when set."""
    max_requests: int = -1
    """Lifetime request budget; -1 = unlimited. Never 0 (a permanently unusable lane)."""
    default_max_tokens: int | None = Field(default=None, json_schema_extra={"minimum": 1})
    """max_tokens injected on a cross-protocol hop to an Anthropic backend when the caller omitted it.
    Unset = limits.default_max_tokens (4096). > 0 when set."""
    upstream_model: str | None = None
    """The model id sent on the wire (body, URL path, health probes). Default: the config key.
    Non-empty when set."""
    attempt_timeout_ms: int | None = Field(default=None, json_schema_extra={"minimum": 1})
    """Per-attempt cap on time to response headers (hang detector); a pool member's value wins.
    Unset = no cap; ≥ 1 when set."""
    reasoning: bool = False
    """This model accepts reasoning/thinking parameters (gates the cross-protocol reasoning carry)."""
    prompt_caching: bool = False
    """This model accepts model-gated prompt-cache markers (Bedrock cachePoint)."""
    operations: list[str] | None = None
    """The operations this model serves (chat, embeddings, rerank, moderation, images, audio).
    Unset = its protocol's default (docs/beyond-chat.md#declaring-what-a-model-serves); a pool
    member that cannot serve a request's operation is skipped for it."""
