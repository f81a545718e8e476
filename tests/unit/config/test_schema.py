"""The typed model: docs/configuration.md defaults, strictness, the JSON Schema export and the generated
docs/config-at-a-glance.md (docs/configuration.md#sections and every subsection)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from busbar.config import schema
from busbar.config.schema import (
    AffinityConfig,
    AuthConfig,
    BreakerConfig,
    DeploymentConfig,
    FailoverConfig,
    HealthConfig,
    MemberConfig,
    ModelConfig,
    ObservabilityConfig,
    PoolConfig,
    SecurityConfig,
    StoreConfig,
    TripConfig,
)
from busbar.config.schema_export import config_json_schema, render_at_a_glance
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[3]


def test_defaults_are_the_documented_ones() -> None:
    """Defaults as docs/config-at-a-glance.md lists them."""
    assert TripConfig().model_dump() == {"mode": "error_rate", "window_secs": 30, "threshold": 0.5,
                                         "min_requests": 5, "consecutive_n": 3}
    br = BreakerConfig()
    assert (br.base_cooldown_secs, br.max_cooldown_secs) == (15, 120)
    assert FailoverConfig().model_dump() == {"timeout_secs": 120, "max_hops": 3, "exclusions": []}
    assert AffinityConfig().model_dump() == {"mode": "session", "header_name": "x-session-id"}
    assert MemberConfig(model="m").model_dump() == {"model": "m", "weight": 1, "context_max": None,
                                                    "attempt_timeout_ms": None, "reasoning": None, "tier": None,
                                                    "tags": []}
    assert ModelConfig(provider="p").model_dump() == {
        "provider": "p", "max_concurrent": None, "max_requests": -1, "default_max_tokens": None,
        "upstream_model": None, "attempt_timeout_ms": None, "reasoning": False, "prompt_caching": False,
        "operations": None}
    assert HealthConfig().model_dump() == {"mode": "none", "interval_secs": 30, "timeout_secs": 5}
    assert PoolConfig(members=[]).on_exhausted == "reject"
    auth = AuthConfig()
    assert (auth.upstream_credentials, auth.chain, auth.admin_auth, auth.role_bindings, auth.signing_key) == \
        ("own", [], ["admin-tokens"], {}, None)
    assert StoreConfig().model_dump() == {"module": "memory", "settings": {}}
    assert ObservabilityConfig().model_dump() == {
        "otlp_url": None, "request_log_webhook_url": None, "emit_server_timing": False,
        "max_inflight_webhook_deliveries": 64, "webhook_delivery_timeout_secs": 2,
        "request_log_file": None, "request_log_rotate_mb": 100}
    assert SecurityConfig().model_dump() == {"blocked_metadata_hosts": [], "allow_metadata_hosts": [],
                                             "allow_all_metadata": False}
    cfg = DeploymentConfig.model_validate({"providers": {}, "models": {}})
    assert (cfg.listen, cfg.admin_listen, cfg.admin_insecure, cfg.tls, cfg.rate_card, cfg.per_request_fee,
            cfg.metrics, cfg.plugins.enabled, cfg.plugins.dir) == \
        ("0.0.0.0:8080", "127.0.0.1:8081", False, None, None, 0, None, False, "plugins")


def _models(root: type[BaseModel]) -> set[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for f in m.model_fields.values():
            todo += [t for t in _walk_types(f.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
    return seen


def _walk_types(tp: Any) -> list[Any]:
    from typing import get_args

    out = [tp]
    for a in get_args(tp):
        out += _walk_types(a)
    return out


def test_every_model_rejects_unknown_keys() -> None:
    for model in _models(DeploymentConfig):
        assert model.model_config.get("extra") == "forbid", model.__name__


def test_every_own_key_is_documented() -> None:
    """Each field's docstring reaches the JSON Schema (the colleague-owned plugins block documents its keys
    in its class docstring, which the at-a-glance doc renders too)."""
    cfg = config_json_schema("config")
    for name, d in [("DeploymentConfig", cfg), *cfg["$defs"].items()]:
        if name in ("PluginsConfig", "PluginTrust", "Publisher"):
            continue
        for key, prop in d.get("properties", {}).items():
            assert prop.get("description"), f"{name}.{key} has no docstring"
    assert config_json_schema("providers")["$defs"]["CatalogProvider"]["properties"]["base_url"]["description"] \
        == "Scheme + host (+ optional path prefix); required in the catalog."


def test_runtime_names_still_importable() -> None:
    for name in ("BreakerConfig", "ModelConfig", "MemberConfig", "PoolConfig", "FallbackPool", "LimitsConfig",
                 "TripConfig", "CatalogProvider", "DeploymentConfig", "EnvRef", "FileRef", "ModuleRef", "HookRef"):
        assert hasattr(schema, name)


def test_json_schema_export() -> None:
    cfg = config_json_schema("config")
    assert cfg["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert cfg["additionalProperties"] is False and cfg["required"] == ["providers", "models"]
    assert list(cfg["properties"]) == [
        "listen", "admin_listen", "admin_insecure", "tls", "admin_tls", "auth", "groups", "rate_card",
        "per_request_fee", "store", "providers", "models", "pools", "global_hooks", "limits", "observability",
        "metrics", "plugins", "security", "advanced"]
    for name, d in cfg["$defs"].items():
        if d.get("type") == "object" and d.get("properties"):
            assert d.get("additionalProperties") is False, name
    assert cfg["$defs"]["BreakerConfig"]["properties"]["trip"]["default"]["consecutive_n"] == 3
    assert cfg["$defs"]["LimitsConfig"]["properties"]["request_body_max_bytes"]["default"] == 33554432
    prov = config_json_schema("providers")
    assert prov["additionalProperties"]["$ref"] == "#/$defs/CatalogProvider"


def test_config_at_a_glance_is_generated_from_the_model() -> None:
    doc = ROOT / "docs" / "config-at-a-glance.md"
    assert doc.read_text("utf-8") == render_at_a_glance(), (
        "docs/config-at-a-glance.md is stale; run: .venv/bin/python -m busbar.config.schema_export --write")


@pytest.mark.parametrize("row", [
    "| `pools.<pool>.members[].weight` | integer | `1` |",
    "| `pools.<pool>.breaker.trip.consecutive_n` | integer | `3` |",
    "| `auth.admin_auth` | list of string or map of map (one entry) | `[\"admin-tokens\"]` |",
    "| `metrics.buffer_seconds` | integer | **required** |",
    "| `<provider>.protocol` | string | `\"anthropic\"` |",
])
def test_at_a_glance_rows(row: str) -> None:
    assert row in render_at_a_glance()
