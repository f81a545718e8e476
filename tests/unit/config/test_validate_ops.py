"""Validation of limits:, observability:, metrics:, security: and advanced: (docs/config-at-a-glance.md#limits,
"observability", "security", "Full annotated example" metrics:)."""
from __future__ import annotations

import pytest
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text

ENV = {"K": "sk-test"}
BASE = "providers:\n  anthropic: { api_key: { env: K } }\nmodels:\n  claude: { provider: anthropic }\n"


def faults(extra: str) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text(BASE + extra, ENV)
    return exc.value.faults


@pytest.mark.parametrize("field, value, line", [
    ("request_body_max_bytes", 0, "0 is not allowed; must be ≥ 1 (default 33554432)"),
    ("upstream_request_timeout_secs", 0, "0 is not allowed; must be ≥ 1 (default 300)"),
    ("max_inbound_concurrent", -1, "-1 is not allowed; must be ≥ 0 (0 = unlimited) (default 8192)"),
    ("default_max_tokens", 0, "0 is not allowed; must be ≥ 1 (default 4096)"),
    ("hard_down_cooldown_secs", 0, "0 is not allowed; must be ≥ 1 (default 1800)"),
    ("upstream_idle_timeout_secs", 0, "0 is not allowed; must be ≥ 1 (default 120)"),
    ("upstream_body_max_bytes", 0, "0 is not allowed; must be ≥ 1 (default 33554432)"),
])
def test_limit_ranges(field: str, value: int, line: str) -> None:
    assert faults(f"limits: {{ {field}: {value} }}\n") == [f"config.yaml: limits.{field}: {line}"]


def test_reasoning_effort_budgets_ascending() -> None:
    assert faults("limits: { reasoning_effort_budgets: { low: 9000 } }\n") == [
        "config.yaml: limits.reasoning_effort_budgets: must be ascending and all > 0 (minimal < low < medium < "
        "high), found 1024, 9000, 8192, 16384"]


def test_the_thirteen_limits_default_to_the_seed() -> None:
    limits = load_config_text(BASE, ENV).config.limits
    python_only = {"stream_keepalive_secs", "header_read_timeout_secs", "keep_alive_timeout_secs",
                   "upstream_idle_timeout_secs", "upstream_body_max_bytes"}
    assert limits.model_dump(exclude={"reasoning_effort_budgets", *python_only}) == {
        "max_inbound_concurrent": 8192, "request_body_max_bytes": 33554432, "upstream_request_timeout_secs": 300,
        "tls_handshake_timeout_secs": 10, "request_body_read_timeout_secs": 30, "pool_max_idle_per_host": 1024,
        "pool_idle_timeout_secs": 300, "hard_down_cooldown_secs": 1800, "upstream_error_body_max_bytes": 262144,
        "max_honored_retry_after_secs": 86400, "default_max_tokens": 4096, "max_keys_per_principal": 0,
        "max_auto_provisioned_groups": 0}
    assert limits.reasoning_effort_budgets.model_dump() == {"minimal": 1024, "low": 4096, "medium": 8192,
                                                            "high": 16384}
    assert (limits.stream_keepalive_secs, limits.upstream_idle_timeout_secs, limits.upstream_body_max_bytes) == (
        15.0, 120, 33554432)


@pytest.mark.parametrize("field, url, reason", [
    ("otlp_url", "http://collector.example.com:4318/v1/traces",
     "uses http:// with a non-loopback host (collector.example.com): remote endpoints must use https://"),
    ("otlp_url", "https://10.0.0.7:4318/v1/traces",
     "10.0.0.7 is a private (RFC 1918 / unique-local) address; refused by the SSRF guard (only loopback or public "
     "https:// endpoints are allowed here)"),
    ("request_log_webhook_url", "http://127.0.0.1:9000/log", "must use https:// (plain http:// is not allowed here)"),
    ("request_log_webhook_url", "https://169.254.169.254/log",
     "169.254.169.254 is a cloud-metadata endpoint; refused by the SSRF guard (list it in allow_metadata_hosts "
     "only if this is deliberate)"),
])
def test_observability_urls_go_through_the_ssrf_guard(field: str, url: str, reason: str) -> None:
    assert faults(f"observability: {{ {field}: '{url}' }}\n") == [f"config.yaml: observability.{field}: {reason}"]


def test_observability_loopback_otlp_is_allowed() -> None:
    cfg = load_config_text(BASE + "observability: { otlp_url: 'http://localhost:4318/v1/traces' }\n", ENV).config
    assert cfg.observability.otlp_url == "http://localhost:4318/v1/traces"


def test_metrics_buffer_seconds_is_required_and_positive() -> None:
    assert faults("metrics: {}\n") == [
        "config.yaml: metrics.buffer_seconds: required key is missing; add buffer_seconds: 60 (seconds of "
        "observations to retain)"]
    assert faults("metrics: { buffer_seconds: 0 }\n") == [
        "config.yaml: metrics.buffer_seconds: must be ≥ 1 (seconds of observations to retain, e.g. 60)"]


def test_security_lists_and_the_allow_all_warning() -> None:
    assert faults("security: { blocked_metadata_hosts: ['not a host'] }\n") == [
        "config.yaml: security: security.blocked_metadata_hosts: 'not a host' is not a host name, IP address or "
        "CIDR (invalid host 'not a host'); use host names, IP literals or CIDRs"]
    warnings = load_config_text(BASE + "security: { allow_all_metadata: true }\n", ENV).warnings
    assert "config.yaml: security.allow_all_metadata: true disables the cloud-metadata SSRF denylist for every " \
           "egress path; development use only" in warnings


def test_advanced() -> None:
    assert faults("advanced: { worker_threads: 0, upstream_http1_only: true, upstream_h2_prior_knowledge: true }\n") == [
        "config.yaml: advanced.worker_threads: must be ≥ 1 (omit it for one per core)",
        "config.yaml: advanced.upstream_h2_prior_knowledge: contradicts upstream_http1_only: true; keep one"]
