"""Startup validation rows for pools: (docs/configuration.md#startup-checks, docs/config-at-a-glance.md#pools,
docs/reliability.md): one minimal config per row, the exact line."""
from __future__ import annotations

import textwrap

import pytest
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text

ENV = {"K": "sk-test"}
BASE = """\
providers:
  anthropic: { api_key: { env: K } }
  openai: { api_key: { env: K } }
models:
  claude: { provider: anthropic }
  gpt: { provider: openai }
  gpt-mini: { provider: openai }
"""


def faults(pools: str) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text(BASE + textwrap.dedent(pools), ENV)
    return exc.value.faults


def ok(pools: str) -> object:
    return load_config_text(BASE + textwrap.dedent(pools), ENV)


@pytest.mark.parametrize("pools, line", [
    ("pools:\n  admin: { members: [ { model: claude } ] }\n",
     "pools.admin: the pool name 'admin' is reserved; rename it"),
    ("pools:\n  gpt: { members: [ { model: claude } ] }\n",
     "pools.gpt: the pool name collides with a model of the same name; rename the pool"),
    ("pools:\n  openai: { members: [ { model: claude } ] }\n",
     "pools.openai: the pool name collides with a provider of the same name; rename the pool"),
    ("pools:\n  p: { members: [] }\n",
     "pools.p.members: a pool with no members is un-routable; add at least one { model: <model> }"),
    ("pools:\n  p: { members: [ { model: claude }, { model: gpt, weight: 0 } ] }\n",
     "pools.p.members[1].weight: must be ≥ 1 (0 never selects the member; omit it for 1)"),
    ("pools:\n  p: { members: [ { model: gpt-4o-mni } ] }\n",
     "pools.p.members[0].model: 'gpt-4o-mni' is not defined under models; fix the name or add the model"),
    ("pools:\n  p: { members: [ { model: claude, attempt_timeout_ms: 0 } ] }\n",
     "pools.p.members[0].attempt_timeout_ms: must be ≥ 1 (omit it to inherit the model's value)"),
    ("pools:\n  p: { members: [ { model: claude, context_max: 0 } ] }\n",
     "pools.p.members[0].context_max: must be ≥ 1 (omit it when the window is unknown)"),
    ("pools:\n  p: { members: [ { model: claude } ], failover: { timeout_secs: 0 } }\n",
     "pools.p.failover.timeout_secs: must be ≥ 1 (a zero failover deadline fails every request; default 120)"),
    ("pools:\n  p: { members: [ { model: claude } ], failover: { exclusions: [gpt] } }\n",
     "pools.p.failover.exclusions[0]: 'gpt' is not a member of this pool; remove it or add the member"),
    ("pools:\n  p: { members: [ { model: claude } ], failover: { max_hops: -1 } }\n",
     "pools.p.failover.max_hops: must be ≥ 0 (default 3)"),
    ("pools:\n  p: { members: [ { model: claude } ], breaker: { base_cooldown_secs: 30, max_cooldown_secs: 10 } }\n",
     "pools.p.breaker.max_cooldown_secs: 10 is below base_cooldown_secs 30; raise it to ≥ the base"),
    ("pools:\n  p: { members: [ { model: claude } ], breaker: { trip: { threshold: 0.0 } } }\n",
     "pools.p.breaker.trip.threshold: 0.0 is outside (0.0, 1.0]; an error fraction like 0.5 (the default)"),
    ("pools:\n  p: { members: [ { model: claude } ], breaker: { trip: { window_secs: 0 } } }\n",
     "pools.p.breaker.trip.window_secs: must be ≥ 1 (default 30)"),
    ("pools:\n  p: { members: [ { model: claude } ], breaker: { trip: { consecutive_n: 0 } } }\n",
     "pools.p.breaker.trip.consecutive_n: must be ≥ 1 (default 3)"),
    ("pools:\n  p: { members: [ { model: claude } ], affinity: { mode: sticky } }\n",
     "pools.p.affinity.mode: 'sticky' is unknown; session is the only mode (omit it for session)"),
    ("pools:\n  p: { members: [ { model: claude } ], affinity: { header_name: 'x session' } }\n",
     "pools.p.affinity.header_name: 'x session' is not an HTTP header name (default x-session-id)"),
    ("pools:\n  p: { members: [ { model: claude } ], on_exhausted: { fallback_pool: p } }\n",
     "pools.p.on_exhausted.fallback_pool: 'p' falls back to itself; name another pool"),
    ("pools:\n  p: { members: [ { model: claude } ], on_exhausted: { fallback_pool: nowhere } }\n",
     "pools.p.on_exhausted.fallback_pool: 'nowhere' is not a configured pool (configured: none); fix the name"),
], ids=["pool-reserved", "collides-model", "collides-provider", "empty-members", "weight-0", "model-missing",
        "member-attempt-timeout-0", "context-max-0", "failover-timeout-0", "exclusion-dangling",
        "max-hops-negative", "cooldown-ceiling", "threshold", "window", "consecutive-n", "affinity-mode",
        "affinity-header", "fallback-self", "fallback-unknown"])
def test_pool_row(pools: str, line: str) -> None:
    assert faults(pools) == [f"config.yaml: {line}"]


def test_fallback_cycle_printed_once_at_its_first_pool() -> None:
    pools = """\
    pools:
      primary: { members: [ { model: claude } ], on_exhausted: { fallback_pool: overflow } }
      entry: { members: [ { model: claude } ], on_exhausted: { fallback_pool: primary } }
      overflow: { members: [ { model: gpt } ], on_exhausted: { fallback_pool: spill } }
      spill: { members: [ { model: gpt } ], on_exhausted: { fallback_pool: primary } }
    """
    assert faults(pools) == [
        "config.yaml: pools.primary.on_exhausted.fallback_pool: fallback cycle primary -> overflow -> spill -> "
        "primary; break the cycle (end one pool's chain with reject or least_bad)"]


@pytest.mark.parametrize("value, expected", [
    ("reject", "reject"), ("status_503", "reject"), ("status503", "reject"), ("503", "reject"),
    ("'503'", "reject"), ("least_bad", "least_bad"), ("least-bad", "least_bad"), ("leastbad", "least_bad"),
])
def test_on_exhausted_spellings(value: str, expected: str) -> None:
    cfg = ok(f"pools:\n  p: {{ members: [ {{ model: claude }} ], on_exhausted: {value} }}\n").config  # type: ignore[attr-defined]
    assert cfg.pools["p"].on_exhausted == expected


@pytest.mark.parametrize("value, line", [
    ("maybe", "pools.p.on_exhausted: 'maybe' is not a known keyword; must be reject, least_bad or "
              "{ fallback_pool: <pool> }"),
    ("[reject]", "pools.p.on_exhausted: must be reject, least_bad or { fallback_pool: <pool> }, found a list"),
    ("{ pool: x }", "pools.p.on_exhausted.fallback_pool: required key is missing; name the pool to fall back to"),
])
def test_on_exhausted_malformed(value: str, line: str) -> None:
    assert faults(f"pools:\n  p: {{ members: [ {{ model: claude }} ], on_exhausted: {value} }}\n")[0] == \
        f"config.yaml: {line}"


def test_heterogeneous_pool_is_a_warning() -> None:
    loaded = ok("pools:\n  mixed: { members: [ { model: claude }, { model: gpt } ] }\n")
    assert "config.yaml: pools.mixed: heterogeneous pool (members speak anthropic, openai); cross-protocol " \
           "translation applies" in loaded.warnings  # type: ignore[attr-defined]


def test_every_pool_fault_at_once() -> None:
    pools = """\
    pools:
      smart:
        members:
          - { model: claude }
          - { model: claude, weight: 0 }
          - { model: ghost }
        on_exhausted: { fallback_pool: smart }
        breaker: { base_cooldown_secs: 30, max_cooldown_secs: 10 }
    """
    assert faults(pools) == [
        "config.yaml: pools.smart.members[1].weight: must be ≥ 1 (0 never selects the member; omit it for 1)",
        "config.yaml: pools.smart.members[2].model: 'ghost' is not defined under models; fix the name or add the "
        "model",
        "config.yaml: pools.smart.breaker.max_cooldown_secs: 10 is below base_cooldown_secs 30; raise it to ≥ the "
        "base",
        "config.yaml: pools.smart.on_exhausted.fallback_pool: 'smart' falls back to itself; name another pool",
    ]
