"""Models of the operational sections: ``limits``, ``observability``, ``metrics``, ``tls``/``admin_tls``,
``store``, ``security`` and ``advanced``.

Shapes and defaults only (every default is the seed's historical value, so omitting a block is a
no-op); range checks and the SSRF verdicts on ``otlp_url`` / ``request_log_webhook_url`` are
``busbar.config.validate_ops``.

Source: docs/config-at-a-glance.md#limits, docs/config-at-a-glance.md#observability, docs/config-at-a-glance.md#tls,
docs/config-at-a-glance.md#store, docs/config-at-a-glance.md#security, docs/config-at-a-glance.md#advanced,
docs/configuration.md (``metrics:``).
"""
from __future__ import annotations

from typing import Any

from pydantic import Field

from busbar.config.schema_base import SecretRef, Strict


class ReasoningBudgets(Strict):
    """``limits.reasoning_effort_budgets``: effort word <-> thinking-token budget (ascending, > 0)."""

    minimal: int = 1024
    """Tokens for effort minimal."""
    low: int = 4096
    """Tokens for effort low."""
    medium: int = 8192
    """Tokens for effort medium."""
    high: int = 16384
    """Tokens for effort high."""


class LimitsConfig(Strict):
    """``limits:`` the thirteen operational limits (plus the effort table); defaults = historical values."""

    max_inbound_concurrent: int = 8192
    """Global inbound concurrency cap (outermost; bounds peak request memory). 0 = unlimited.
    Restart-to-apply."""
    request_body_max_bytes: int = 33554432
    """Max inbound request body (bytes); over it = protocol-native 413. 32 MiB."""
    upstream_request_timeout_secs: int = 300
    """Per-upstream-request wall-clock timeout (connect + full response). Restart-to-apply."""
    tls_handshake_timeout_secs: int = 10
    """Cap on each inbound TLS handshake (ignored without tls:)."""
    request_body_read_timeout_secs: int = 30
    """Max gap between inbound body frames (slow-loris body defence)."""
    pool_max_idle_per_host: int = 1024
    """Idle upstream connections kept per host. Restart-to-apply."""
    pool_idle_timeout_secs: int = 300
    """How long an idle upstream keep-alive connection is kept. Restart-to-apply."""
    hard_down_cooldown_secs: int = 1800
    """Sticky cooldown after an auth/billing disposition (recovers via a health probe)."""
    upstream_error_body_max_bytes: int = 262144
    """Bytes buffered from a non-2xx upstream body for error classification. 256 KiB."""
    max_honored_retry_after_secs: int = 86400
    """Largest upstream Retry-After honoured (24 h)."""
    default_max_tokens: int = 4096
    """Gateway-wide max_tokens injected on cross-protocol hops to Anthropic (a model's own value wins)."""
    max_keys_per_principal: int = 0
    """Live keys one group may have bound (anti-sprawl). 0 = unlimited."""
    max_auto_provisioned_groups: int = 0
    """Groups a mint may auto-provision (anti-sprawl). 0 = unlimited."""
    reasoning_effort_budgets: ReasoningBudgets = Field(default_factory=ReasoningBudgets)
    """Effort word <-> thinking-token budget table (ascending, all > 0)."""
    stream_keepalive_secs: float = 15.0
    """Busbar (Python) extension: seconds of upstream stream silence before a keep-alive is sent to the
    client. > 0."""
    header_read_timeout_secs: int = 30
    """Busbar (Python) extension: seconds a connection has to send a whole request head, from its
    start or from the first byte of a later request (408 and close; silent close when nothing came)."""
    keep_alive_timeout_secs: int = 75
    """Busbar (Python) extension: seconds an idle keep-alive connection is kept between requests."""
    upstream_idle_timeout_secs: int = 120
    """Busbar (Python) extension: seconds an upstream stream may stay silent after its first event; then
    the client's stream ends with its protocol's in-band error and the lane takes a transient failure."""
    upstream_body_max_bytes: int = 33554432
    """Busbar (Python) extension: bytes buffered from a 2xx upstream body (a non-stream answer, a stream
    before its first event), decompressed bytes counted; over it = transient fault, fail over. 32 MiB."""


class ObservabilityConfig(Strict):
    """``observability:`` opt-in sinks; all restart-to-apply."""

    otlp_url: str | None = None
    """OTLP/HTTP trace exporter endpoint. Loopback http:// allowed; remote must be https://;
    SSRF-guarded (RFC-1918, link-local, CGNAT, metadata refused). Userinfo moves to an
    Authorization: Basic header."""
    request_log_webhook_url: str | None = None
    """Fire-and-forget JSON POST per completed request. Must be https://; SSRF-guarded."""
    emit_server_timing: bool = False
    """Emit Server-Timing: busbar;dur=<ms> on every response (an in-band fingerprint; off by default)."""
    max_inflight_webhook_deliveries: int = 64
    """Webhook deliveries in flight before new ones are dropped (sized at the first delivery). ≥ 1."""
    webhook_delivery_timeout_secs: int = 2
    """Per-delivery timeout, in seconds. ≥ 1."""
    request_log_file: str | None = None
    """Busbar (Python) extension: append one JSON line per completed request to this file (the webhook's
    document; docs/operations.md#request-log-sinks). Its directory must exist and be writable."""
    request_log_rotate_mb: int = 100
    """Busbar (Python) extension: rotate request_log_file at this many MiB (keeps 5 rotated files). ≥ 1."""


class MetricsConfig(Strict):
    """``metrics:`` Prometheus, opt-in: absent = nothing recorded and no /metrics route."""

    buffer_seconds: int
    """REQUIRED: seconds of observations retained (quantile window; bounds the memory metrics cost). ≥ 1."""


class TlsConfig(Strict):
    """``tls:`` / ``admin_tls:`` native TLS termination; with client_ca, mutual TLS is required."""

    cert: SecretRef
    """PEM certificate chain, leaf first (secret reference)."""
    key: SecretRef
    """PEM private key: PKCS#8, PKCS#1 or SEC1 (secret reference)."""
    client_ca: SecretRef | None = None
    """PEM CA bundle; present = client certificates are required (mTLS)."""


class SecurityConfig(Strict):
    """``security:`` extends or overrides the built-in cloud-metadata SSRF denylist."""

    blocked_metadata_hosts: list[str] = Field(default_factory=list)
    """Hosts/IPs/CIDRs appended to the built-in denylist (obfuscation-aware matching)."""
    allow_metadata_hosts: list[str] = Field(default_factory=list)
    """Hosts/IPs/CIDRs unblocked for every provider (allow always wins)."""
    allow_all_metadata: bool = False
    """Disable the SSRF metadata denylist entirely (development only; logs a startup warning)."""


class StoreConfig(Strict):
    """``store:`` the durable store as a plugin instance; memory = the compiled-in ephemeral RAM store."""

    module: str = "memory"
    """memory (default, no plugin) | sqlite | postgres | redis (aliases of busbar-store-*) | a
    third-party kind: store plugin. Non-memory needs plugins.enabled: true."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """The store module's own opaque configuration (sqlite: db_path, busy_timeout_ms; postgres/redis:
    url)."""


class AdvancedConfig(Strict):
    """``advanced:`` rarely-touched engine tuning (absent = defaults)."""

    rate_sweep_interval: int = 256
    """Admissions between sweeps of idle rate-limit windows. ≥ 1."""
    usage_flush_interval_ms: int = 100
    """How often accumulated usage is flushed to the store, in ms. ≥ 1."""
    worker_threads: int | None = None
    """Worker threads; unset = one per available core. ≥ 1 when set."""
    upstream_http1_only: bool = False
    """Force HTTP/1.1 to upstreams."""
    upstream_h2_prior_knowledge: bool = False
    """Speak HTTP/2 to upstreams without negotiation (h2c / known-h2 endpoints)."""
