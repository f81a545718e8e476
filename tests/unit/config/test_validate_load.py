"""The load pipeline: 1.x refusal, YAML faults, shape faults at every level, interpolation faults, and
"never a traceback" (docs/configuration.md#startup-checks, docs/security.md#5-var-interpolation-structure-preserving,
docs/configuration.md#migrating-from-1x."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from busbar.config.errors import ConfigError
from busbar.config.load import load_config, load_config_text
from hypothesis import given, settings
from hypothesis import strategies as st

ENV = {"K": "sk-test"}
BASE = "providers:\n  anthropic: { api_key: { env: K } }\nmodels:\n  claude: { provider: anthropic }\n"
MIGRATE = "this looks like a Busbar 1.x config; run busbar --migrate-config"


def faults(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text(text, ENV if env is None else env)
    return exc.value.faults


@pytest.mark.parametrize("text, path", [
    ("governance: { enabled: true }\n", "governance"),
    ("auth: { group_map: {} }\n", "auth.group_map"),
    ("auth: { mode: tokens }\n", "auth.mode"),
    ("auth: { client_tokens: [a] }\n", "auth.client_tokens"),
    ("hooks: { router: { webhook: 'https://x' } }\n", "hooks"),
    ("group_map: {}\n", "group_map"),
    ("admin_auth: [admin-tokens]\n", "admin_auth"),
    ("route: weighted\n", "route"),
    ("providers2: {}\n".replace("providers2: {}", "x: 1").replace("x: 1", "policy: {}"), "policy"),
], ids=["governance", "auth.group_map", "auth.mode", "auth.client_tokens", "hooks", "group_map", "admin_auth",
        "route", "policy"])
def test_top_level_1x_markers(text: str, path: str) -> None:
    assert faults(BASE + text) == [f"config.yaml: {path}: {MIGRATE}"]


def test_nested_1x_markers_all_listed() -> None:
    text = """\
providers:
  openai: { api_key_env: OPENAI_KEY }
models:
  m: { provider: openai }
pools:
  smart:
    route: webhook
    policy: { url: "http://127.0.0.1:8787/", timeout_ms: 1, on_error: weighted }
    members:
      - { target: m, cost_per_mtok: 3.0 }
    on_exhausted: { action: least_bad }
"""
    assert faults(text) == [f"config.yaml: {p}: {MIGRATE}" for p in (
        "providers.openai.api_key_env", "pools.smart.route", "pools.smart.policy",
        "pools.smart.on_exhausted.action", "pools.smart.members[0].target", "pools.smart.members[0].cost_per_mtok")]


def test_duplicate_keys_are_faults_with_lines() -> None:
    text = BASE + "pools:\n  p: { members: [ { model: claude } ] }\n  p: { members: [] }\n"
    assert faults(text) == ["config.yaml:7: duplicate key 'p' (first at line 6; the later one would silently "
                            "replace it); remove or rename one"]


def test_yaml_anchors_and_merge_keys_are_not_duplicates() -> None:
    text = BASE + "pools:\n  a: &pool { members: [ { model: claude } ], failover: { max_hops: 2 } }\n" \
                  "  b: { <<: *pool, failover: { max_hops: 1 } }\n"
    cfg = load_config_text(text, ENV).config
    assert cfg.pools["b"].failover.max_hops == 1 and cfg.pools["b"].members[0].model == "claude"


@pytest.mark.parametrize("extra, line", [
    ("colour: blue\n", "colour: unknown key (typo?); remove it or check the spelling in docs/config-at-a-glance.md"),
    ("pool:\n  p: { members: [ { model: claude } ] }\n",
     "pool: unknown key (typo? did you mean pools?); remove it or check the spelling in docs/config-at-a-glance.md"),
    ("pools:\n  p: { members: [ { model: claude, wieght: 2 } ] }\n",
     "pools.p.members[0].wieght: unknown key (typo? did you mean weight?); remove it or check the spelling in "
     "docs/config-at-a-glance.md"),
    ("pools:\n  p: { members: [ { model: claude } ], breaker: { trip: { window_s: 10 } } }\n",
     "pools.p.breaker.trip.window_s: unknown key; write window_secs (the pre-1.0 alias is gone)"),
    ("pools:\n  p: { members: [ { model: claude } ], failover: { deadline_secs: 10 } }\n",
     "pools.p.failover.deadline_secs: unknown key; write timeout_secs (the alias is gone)"),
    ("pools:\n  p: { members: [ { model: claude } ], hooks: [ { module: m, timeout: 5 } ] }\n",
     "pools.p.hooks[0].timeout: unknown key (typo? did you mean timeout_ms?); remove it or check the spelling in "
     "docs/config-at-a-glance.md"),
    ("groups:\n  g: { limits: [ { requets: 5, per: day } ] }\n",
     "groups.g.limits[0].requets: unknown key (typo? did you mean requests?); remove it or check the spelling in "
     "docs/config-at-a-glance.md"),
    ("auth: { role_bindings: { ad: { r: { groups: x } } } }\n",
     "auth.role_bindings.ad.r.groups: unknown key (typo? did you mean group?); remove it or check the spelling in "
     "docs/config-at-a-glance.md"),
    ("observability: { otlp_endpoint: 'https://x.example.com' }\n",
     "observability.otlp_endpoint: unknown key; write otlp_url"),
    ("limits: { max_inbound_concurent: 5 }\n",
     "limits.max_inbound_concurent: unknown key (typo? did you mean max_inbound_concurrent?); remove it or check "
     "the spelling in docs/config-at-a-glance.md"),
    ("security: { allow_all_metadta: true }\n",
     "security.allow_all_metadta: unknown key (typo? did you mean allow_all_metadata?); remove it or check the "
     "spelling in docs/config-at-a-glance.md"),
    ("tls: { cert: { file: a }, key: { file: b }, client_cert: { file: c } }\n",
     "tls.client_cert: unknown key (typo? did you mean client_ca?); remove it or check the spelling in docs/config-at-a-glance.md"),
], ids=["top", "top-suggest", "member", "retired-window_s", "retired-deadline", "hook", "limit", "role",
        "retired-otlp", "limits", "security", "tls"])
def test_unknown_keys_rejected_at_every_level(extra: str, line: str) -> None:
    assert faults(BASE + extra) == [f"config.yaml: {line}"]


@pytest.mark.parametrize("extra, line", [
    ("pools:\n  p: { members: [ { model: claude, weight: '2' } ] }\n",
     "pools.p.members[0].weight: must be a whole number, found '2'"),
    ("pools:\n  p: { members: [ { model: claude, weight: 1.5 } ] }\n",
     "pools.p.members[0].weight: must be a whole number, found 1.5"),
    ("groups:\n  g: { enabled: maybe }\n", "groups.g.enabled: must be true or false, found 'maybe'"),
    ("models2: 1\n".replace("models2: 1", "listen: 8080"), "listen: must be a string, found 8080 (quote it: \"8080\")"),
    ("pools:\n  p: { members: { model: claude } }\n", "pools.p.members: must be a list, found a map"),
    ("pools:\n  p: { members: [ { model: claude } ], breaker: { trip: { mode: streak } } }\n",
     "pools.p.breaker.trip.mode: 'streak' is not allowed; use 'error_rate' or 'consecutive'"),
], ids=["quoted-int", "float-int", "bool", "str", "list", "literal"])
def test_type_faults(extra: str, line: str) -> None:
    assert faults(BASE + extra) == [f"config.yaml: {line}"]


def test_required_sections_and_keys() -> None:
    assert faults("listen: '0.0.0.0:8080'\n") == [
        "config.yaml: providers: required key is missing; add providers: (at least one provider with its api_key)",
        "config.yaml: models: required key is missing; add models: (at least one model naming its provider)"]
    assert faults("providers:\n  anthropic: {}\nmodels:\n  m: {}\n") == [
        "config.yaml: providers.anthropic.api_key: required key is missing; add api_key: { env: VAR } (a secret "
        "reference)",
        "config.yaml: models.m.provider: required key is missing; name an entry under providers:"]


def test_all_shape_faults_at_once() -> None:
    text = BASE + "pools:\n  p: { members: [ { model: claude, weight: x } ], colour: red }\nlimits: { foo: 1 }\n"
    assert faults(text) == [
        "config.yaml: pools.p.members[0].weight: must be a whole number, found 'x'",
        "config.yaml: pools.p.colour: unknown key (typo?); remove it or check the spelling in docs/config-at-a-glance.md",
        "config.yaml: limits.foo: unknown key (typo?); remove it or check the spelling in docs/config-at-a-glance.md"]


def test_yaml_syntax_and_document_shape() -> None:
    assert faults(BASE + "pools: [\n") == ["config.yaml:6: invalid YAML: expected the node content, but found "
                                           "'<stream end>'"]
    assert faults("- a\n- b\n") == ["config.yaml: must be a map (providers:, models:, pools:, …)"]


@pytest.mark.parametrize("text, line", [
    ("listen: ${NO_SUCH_VAR_X}\n", "config.yaml:1: unset environment variable: NO_SUCH_VAR_X"),
    ("listen: ${}\n", "config.yaml:1: empty variable name in ${}"),
])
def test_interpolation_rows(text: str, line: str) -> None:
    assert faults(BASE + text)[0] == line.replace(":1:", ":5:")


def test_interpolation_unclosed() -> None:
    assert faults(BASE + "listen: ${HOST\n")[0].startswith("config.yaml:5: unclosed variable reference")


def test_interpolated_values_reach_the_model() -> None:
    text = "providers:\n  internal:\n    base_url: \"https://${LLM_GATEWAY_HOST}/v1\"\n" \
           "    api_key: { env: INTERNAL_KEY }\nmodels:\n  m: { provider: internal }\nlisten: \"0.0.0.0:${PORT}\"\n"
    cfg = load_config_text(text, {"LLM_GATEWAY_HOST": "gw.example.com", "PORT": "9000", "INTERNAL_KEY": "k"}).config
    assert cfg.providers["internal"].base_url == "https://gw.example.com/v1" and cfg.listen == "0.0.0.0:9000"


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path / "absent.yaml", tmp_path / "nope.yaml", ENV)
    assert exc.value.faults == [
        f"nope.yaml: file not found: {tmp_path / 'nope.yaml'}; pass --config/--providers or set "
        f"BUSBAR_CONFIG/BUSBAR_PROVIDERS",
        f"absent.yaml: file not found: {tmp_path / 'absent.yaml'}; pass --config/--providers or set "
        f"BUSBAR_CONFIG/BUSBAR_PROVIDERS"]


def test_validation_has_no_side_effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--validate binds nothing and writes nothing: a config naming an unreadable store path and a port in
    use still validates without touching either."""
    import socket

    def refuse(*a: Any, **k: Any) -> None:
        raise AssertionError("validation opened a socket")

    monkeypatch.setattr(socket.socket, "bind", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    before = set(tmp_path.iterdir())
    cfg = tmp_path / "config.yaml"
    cfg.write_text(BASE + "plugins: { enabled: true, dir: " + str(tmp_path / "plugins") + " }\n"
                   "store: { module: sqlite, settings: { db_path: " + str(tmp_path / "gov.db") + " } }\n")
    load_config(cfg, None, ENV)
    assert set(tmp_path.iterdir()) == before | {cfg}


# --- never a traceback ---------------------------------------------------------------------------------

_KEYS = ["providers", "models", "pools", "members", "model", "weight", "hooks", "module", "on_exhausted",
         "fallback_pool", "groups", "parent", "limits", "requests", "per", "auth", "chain", "api_key", "env",
         "provider", "breaker", "trip", "settings", "url", "rate_card", "listen", "on_error", "hook", "x"]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.floats(allow_nan=True),
                     st.sampled_from(["", "admin", "anthropic", "reject", "cheapest", "${K}", "http://0x7f.1/",
                                      "minute", "keys", "claude", "[", "{", "a: b"]))
_DOCS = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5)), max_leaves=25)


@settings(max_examples=150, deadline=None)
@given(doc=st.dictionaries(st.sampled_from(_KEYS), _DOCS, max_size=6))
def test_any_document_is_valid_or_a_list_of_fault_lines(doc: dict[str, Any]) -> None:
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        load_config_text(text, ENV)
    except ConfigError as e:
        assert e.faults and all(isinstance(f, str) and "\n" not in f for f in e.faults)
