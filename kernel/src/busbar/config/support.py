"""What this build does with every config key: the one registry of readers and unsupported keys.

The rule: a config key is either enforced or refused at boot. Every leaf of the config.yaml schema
(:class:`busbar.config.schema.DeploymentConfig`) is listed here exactly once, by a path pattern
(``models.*.weight``, ``pools.*.members[].tags``; ``*`` is a map key, ``[]`` a list item; a pattern
also covers everything under it):

- :data:`READERS`: path -> the kernel module that reads the value at run time (the unit test checks
  the module exists and names the field);
- :data:`UNSUPPORTED`: keys this build parses (they are part of the 1.5 format) but cannot honour.
  Left at their default they are inert and fine; **set to anything else** they are refused at boot,
  and by ``busbar --validate``, with one line each::

      config.yaml: groups: the group limit tree is not supported in this build; see docs/unsupported-keys.md

- :data:`NO_EFFECT`: keys whose every accepted value already describes what this build does (so
  honouring them needs no code), with the reason.

``docs/unsupported-keys.md`` is generated from this module (``python -m busbar.config.support
--write``; a test fails when it is stale), and a test walks the schema and fails when a field is in
none of the three lists. Later releases move entries from :data:`UNSUPPORTED` to :data:`READERS`.

``unsupported_faults(cfg, src) -> list[tuple[str, str]]``: ``(key path, fault line)`` for every
unsupported key set to a non-default value (used by ``busbar.config.validate`` with
``check_support=True``: the gateway boot and ``busbar --validate``; ``busbar store`` works on the
store config without it).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

__all__ = ["DOC_PATH", "NO_EFFECT", "READERS", "UNSUPPORTED", "Unsupported", "render_doc",
           "unsupported_faults"]

DOC_PATH = "docs/unsupported-keys.md"
_TAIL = f"is not supported in this build; see {DOC_PATH}"


@dataclass(frozen=True)
class Unsupported:
    """One key (or section) this build cannot honour.

    Attributes:
        path: the key path (no wildcards: these are fixed keys or whole sections).
        feature: what setting it asks for, as the fault line and the doc name it.
        missing: what this build lacks, for the doc.
    """

    path: str
    feature: str
    missing: str


#: The keys refused at boot when set to a non-default value (order = doc order = fault order).
UNSUPPORTED: tuple[Unsupported, ...] = (
    Unsupported("advanced.worker_threads", "a worker thread count (run `busbar --workers N` for more cores)",
                "each busbar process runs one event loop (Python threads would not add cores); run "
                "`busbar --workers N` for N processes over one listening socket (docs/stores.md#a-fleet)"),
    Unsupported("advanced.upstream_h2_prior_knowledge", "HTTP/2 to upstreams (the upstream client is HTTP/1.1 only)",
                "the upstream client (aiohttp) speaks HTTP/1.1 only: it has no HTTP/2, with or without prior "
                "knowledge"),
)

#: Keys whose every accepted value is what this build does anyway: key -> why no code is needed.
NO_EFFECT: dict[str, str] = {
    "advanced.upstream_http1_only": "the upstream client speaks HTTP/1.1 only, so both values hold",
}

#: key path pattern -> the kernel module (under busbar/) that reads it at run time.
READERS: dict[str, str] = {
    "listen": "cli.py",
    "store.module": "store/attach.py",
    "store.settings": "store/attach.py",
    "advanced.usage_flush_interval_ms": "store/attach.py",
    "advanced.rate_sweep_interval": "limits/gate.py",    # the limiter sweeps idle windows every N admissions
    "auth.chain": "auth/boot.py",
    "auth.signing_key": "auth/boot.py",
    "auth.upstream_credentials": "proxy/attempt.py",
    "auth.role_bindings.*.*.allowed_pools": "auth/roles.py",
    "auth.role_bindings.*.*.group": "auth/roles.py",
    "admin_listen": "admin/server.py",
    "admin_tls": "admin/server.py",
    "admin_insecure": "config/validate_auth.py",          # the exposure rule; the listener is admin/server.py
    "auth.admin_auth": "admin/server.py",
    "auth.role_bindings.*.*.admin_scope": "admin/scopes.py",
    "limits.max_keys_per_principal": "admin/keys.py",
    "limits.max_auto_provisioned_groups": "admin/keys.py",
    "tls": "server/tls.py",
    "providers.*.api_key": "proxy/gateway.py",
    "providers.*.protocol": "proxy/gateway.py",
    "providers.*.base_url": "proxy/gateway.py",
    "providers.*.error_map": "proxy/disposition.py",
    "providers.*.path": "proxy/gateway.py",
    "providers.*.path_base": "proxy/gateway.py",
    "providers.*.auth": "proxy/credentials.py",
    "providers.*.token_url": "proxy/credentials.py",
    "providers.*.scope": "proxy/credentials.py",
    "providers.*.subject": "proxy/credentials.py",
    "providers.*.health.mode": "proxy/health.py",
    "providers.*.health.interval_secs": "proxy/health.py",
    "providers.*.health.timeout_secs": "proxy/health.py",
    "providers.*.allow_metadata_hosts": "proxy/gateway.py",
    "models.*.provider": "proxy/gateway.py",
    "models.*.max_concurrent": "proxy/runtime.py",
    "models.*.max_requests": "proxy/runtime.py",
    "models.*.default_max_tokens": "proxy/runtime.py",
    "models.*.upstream_model": "proxy/runtime.py",
    "models.*.attempt_timeout_ms": "proxy/runtime.py",
    "models.*.reasoning": "proxy/runtime.py",
    "models.*.prompt_caching": "proxy/runtime.py",
    "models.*.operations": "proxy/runtime.py",
    "pools.*.members[].model": "proxy/gateway.py",
    "pools.*.members[].weight": "proxy/runtime.py",
    "pools.*.members[].context_max": "proxy/runtime.py",
    "pools.*.members[].attempt_timeout_ms": "proxy/runtime.py",
    "pools.*.members[].reasoning": "proxy/runtime.py",
    "pools.*.members[].tier": "proxy/runtime.py",
    "pools.*.members[].tags": "proxy/runtime.py",
    "pools.*.hooks[]": "hooks/engine.py",
    "pools.*.breaker.trip.mode": "proxy/breaker.py",
    "pools.*.breaker.trip.window_secs": "proxy/breaker.py",
    "pools.*.breaker.trip.threshold": "proxy/breaker.py",
    "pools.*.breaker.trip.min_requests": "proxy/breaker.py",
    "pools.*.breaker.trip.consecutive_n": "proxy/breaker.py",
    "pools.*.breaker.base_cooldown_secs": "proxy/breaker.py",
    "pools.*.breaker.max_cooldown_secs": "proxy/breaker.py",
    "pools.*.failover.timeout_secs": "proxy/engine.py",
    "pools.*.failover.max_hops": "proxy/engine.py",
    "pools.*.failover.exclusions": "proxy/runtime.py",
    "pools.*.on_exhausted": "proxy/runtime.py",
    "pools.*.affinity.mode": "config/validate_pools.py",     # session is the only accepted value
    "pools.*.affinity.header_name": "proxy/runtime.py",
    "pools.*.translation": "proxy/engine.py",
    "global_hooks[]": "hooks/engine.py",
    "rate_card.*.input_utok": "limits/cost.py",
    "rate_card.*.output_utok": "limits/cost.py",
    "rate_card.*.cache_read_utok": "limits/cost.py",
    "rate_card.*.cache_write_utok": "limits/cost.py",
    "rate_card.*.per_image_utok": "limits/units.py",
    "rate_card.*.per_audio_second_utok": "limits/units.py",
    "rate_card.*.per_character_utok": "limits/units.py",
    "rate_card.*.per_search_unit_utok": "limits/units.py",
    "per_request_fee": "limits/cost.py",
    "groups.*.parent": "limits/tree.py",
    "groups.*.enabled": "limits/tree.py",
    "groups.*.limits[]": "limits/tree.py",
    "groups.*.child_default": "admin/provision.py",
    "limits.max_inbound_concurrent": "server/dataplane.py",
    "limits.request_body_max_bytes": "server/dataplane.py",
    "limits.upstream_request_timeout_secs": "proxy/engine.py",
    "limits.request_body_read_timeout_secs": "server/dataplane.py",
    "limits.pool_max_idle_per_host": "proxy/egress.py",
    "limits.pool_idle_timeout_secs": "proxy/egress.py",
    "limits.hard_down_cooldown_secs": "proxy/engine.py",
    "limits.upstream_error_body_max_bytes": "proxy/attempt.py",
    "limits.max_honored_retry_after_secs": "proxy/attempt.py",
    "limits.default_max_tokens": "proxy/translate.py",
    "limits.reasoning_effort_budgets": "proxy/translate.py",
    "limits.stream_keepalive_secs": "proxy/engine.py",
    "limits.header_read_timeout_secs": "server/lifecycle.py",
    "limits.keep_alive_timeout_secs": "server/lifecycle.py",
    "limits.tls_handshake_timeout_secs": "server/lifecycle.py",
    "limits.upstream_idle_timeout_secs": "proxy/engine.py",
    "limits.upstream_body_max_bytes": "proxy/engine.py",
    "observability.emit_server_timing": "server/dataplane.py",
    "observability.otlp_url": "observe/traces.py",
    "metrics.buffer_seconds": "proxy/metrics.py",
    "observability.request_log_webhook_url": "observe/sinks.py",
    "observability.max_inflight_webhook_deliveries": "observe/sinks.py",
    "observability.webhook_delivery_timeout_secs": "observe/sinks.py",
    "observability.request_log_file": "observe/sinks.py",
    "observability.request_log_rotate_mb": "observe/sinks.py",
    "plugins.enabled": "loader/pipeline.py",
    "plugins.dir": "loader/pipeline.py",
    "plugins.trust.publishers": "config/schema_plugins.py",   # PluginTrust.key_for (loader/verify.py)
    "plugins.trust.allow_unsigned": "loader/verify.py",
    "plugins.trust.allow_third_party": "loader/verify.py",
    "plugins.min_versions": "loader/verify.py",
    "security.blocked_metadata_hosts": "security/ssrf.py",
    "security.allow_metadata_hosts": "security/ssrf.py",
    "security.allow_all_metadata": "security/ssrf.py",
}


def _default_of(model: type[BaseModel], name: str) -> Any:
    return model.model_fields[name].get_default(call_default_factory=True)


def _values(node: Any, parts: list[str], path: str) -> list[tuple[str, Any, Any]]:
    """``(concrete path, value, default)`` for each place ``parts`` names under ``node``."""
    head, rest = parts[0], parts[1:]
    if head == "*":
        if not isinstance(node, dict) or not rest:
            return []
        return [v for key, child in node.items() for v in _values(child, rest, f"{path}.{key}")]
    if not isinstance(node, BaseModel) or head not in type(node).model_fields:
        return []
    child, where = getattr(node, head), f"{path}.{head}" if path else head
    if not rest:
        return [(where, child, _default_of(type(node), head))]
    return _values(child, rest, where)


def _shown(value: Any) -> str:
    if isinstance(value, (str, int, float, bool)) and not isinstance(value, BaseModel):
        return f"{value!r}: "
    return ""


def unsupported_faults(cfg: Any, src: str) -> list[tuple[str, str]]:
    """Every unsupported key of ``cfg`` (a ``DeploymentConfig``) set to a non-default value.

    Returns:
        ``[(key path, "config.yaml: <path>: <value>: <feature> is not supported in this build; see
        docs/unsupported-keys.md")]`` in :data:`UNSUPPORTED` order.
    """
    out: list[tuple[str, str]] = []
    for entry in UNSUPPORTED:
        for where, value, default in _values(cfg, entry.path.split("."), ""):
            if value != default:
                out.append((where, f"{src}: {where}: {_shown(value)}{entry.feature} {_TAIL}"))
    return out


def render_doc() -> str:
    """The text of ``docs/unsupported-keys.md``, generated from the registry."""
    lines = [
        "# Config keys this build does not support",
        "",
        "<!-- generated by: python -m busbar.config.support --write (do not edit by hand) -->",
        "",
        "Busbar reads the whole 1.5 config format, and every key either does what",
        "[configuration.md](configuration.md) says or is refused at boot. The keys below are part of the",
        "format but this build cannot honour them yet. Left out, or at their default, they are inert and",
        "the config boots; **set to anything else** the boot (and `busbar --validate`) refuses, one line",
        "per key, naming it:",
        "",
        "```text",
        f"config.yaml: {UNSUPPORTED[0].path}: {UNSUPPORTED[0].feature} {_TAIL}",
        "```",
        "",
        "Remove the key (or set it back to its default) to boot. Later releases move keys off this list.",
        "",
        "| key | setting it asks for | why this build cannot honour it |",
        "|---|---|---|",
    ]
    lines += [f"| `{u.path}` | {u.feature} | {u.missing} |" for u in UNSUPPORTED]
    lines += [
        "",
        "## Keys accepted with every value",
        "",
        "These keys are honoured whatever they say, because what they ask for is what this build does:",
        "",
        "| key | why |",
        "|---|---|",
    ]
    lines += [f"| `{path}` | {why} |" for path, why in NO_EFFECT.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    root = Path(__file__).resolve().parents[4]
    if sys.argv[1:] == ["--write"]:
        (root / DOC_PATH).write_text(render_doc(), "utf-8")
    else:
        sys.stdout.write(render_doc())
