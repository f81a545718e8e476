"""``busbar --migrate-config``: 1.x configs (docs/hooks-firstparty.md's 1.2-era pools, a representative 1.4.x config)
convert to 1.5.0 configs that pass validation once plugins are enabled; judgment calls become TODO(migrate) /
WARNING(migrate) comments (docs/configuration.md#migrating-from-1x)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from busbar.config.errors import ConfigError
from busbar.config.legacy import legacy_markers
from busbar.config.load import load_config_text
from busbar.config.migrate import FLIP_WARNING, MigrateError, migrate_text
from busbar.config.migrate_emit import render
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[3]
LEGACY = ROOT / "tests" / "data" / "config_corpus" / "legacy"
VALID = ROOT / "tests" / "data" / "config_corpus" / "valid"
ENABLE = "plugins: { enabled: true }\n"


def old_config(name: str) -> tuple[str, dict[str, str]]:
    """A legacy corpus file as one config document (header dropped, fragment + context joined)."""
    text = (LEGACY / name).read_text("utf-8")
    env_line = re.search(r"^#\| env: (.*)$", text, re.MULTILINE)
    env = {v: f"value-{v}" for v in (env_line.group(1).split() if env_line else [])}
    body = "\n".join(line for line in text.split("\n") if not line.startswith("#|") and line != "---")
    return body, env


def migrated(name: str) -> tuple[Any, str, dict[str, str]]:
    text, env = old_config(name)
    result = migrate_text(text, source=name)
    return result, result.yaml, env


@pytest.mark.parametrize("name", ["002-route-socket.yaml", "002-route-webhook.yaml", "14x-full.yaml"])
def test_old_config_is_refused_then_migrates_into_a_valid_config(name: str) -> None:
    text, env = old_config(name)
    with pytest.raises(ConfigError) as exc:
        load_config_text(text, env)
    assert all(f.endswith("this looks like a Busbar 1.x config; run busbar --migrate-config") for f in exc.value.faults)
    _, new, env = migrated(name)
    assert legacy_markers(yaml.safe_load(new)) == []
    with pytest.raises(ConfigError) as exc:
        load_config_text(new, env)       # the migrator never flips the plugin master switch itself
    assert all("plugins.enabled is false" in f for f in exc.value.faults)
    loaded = load_config_text(new + ENABLE, env)
    assert loaded.config.models
    assert "# TODO(migrate): this config names plugins" in new


def test_seed_002_webhook_route_becomes_a_webrequest_module_ref() -> None:
    result, new, env = migrated("002-route-webhook.yaml")
    pool = load_config_text(new + ENABLE, env).config.pools["my-smart-model"]
    ref = pool.hooks[0]
    assert ref.model_dump() == {"module": "busbar-webrequest-hook", "settings": {"url": "http://127.0.0.1:8787/"},
                                "kind": "gate", "timeout_ms": 1, "on_error": "weighted", "on_empty": "reject",
                                "prompt": "no", "user": "no", "priority": 0, "at": "request", "shadow": False}
    assert [(m.model, m.tier) for m in pool.members] == [("claude-fable", "fable"), ("claude-opus", "opus"),
                                                         ("claude-sonnet", "sonnet"), ("claude-haiku", "haiku")]
    assert "pools.my-smart-model.route: webhook -> hooks[0]" in result.changes


def test_member_cost_per_mtok_becomes_a_rate_card_that_keeps_the_cheapest_order() -> None:
    result, new, env = migrated("002-route-socket.yaml")
    card = load_config_text(new + ENABLE, env).config.rate_card
    assert card is not None
    scalar = {m: (e.input_utok + e.output_utok) / 2 for m, e in card.items()}
    assert scalar == {"claude-fable": 25.0, "claude-opus": 15.0, "claude-sonnet": 3.0, "claude-haiku": 0.8}
    assert any(t.startswith("rate_card: entries came from member cost_per_mtok") for t in result.todos)


def test_socket_route_keeps_its_settings_with_a_todo() -> None:
    _, new, env = migrated("002-route-socket.yaml")
    ref = load_config_text(new + ENABLE, env).config.pools["my-smart-model"].hooks[0]
    assert (ref.module, ref.settings, ref.timeout_ms, ref.on_error) == \
        ("socket-router-hook", {"socket": "/run/busbar/router.sock"}, 1, "weighted")
    lines = new.split("\n")
    at = lines.index("      - module: socket-router-hook")
    assert lines[at - 1].startswith("      # TODO(migrate): route: socket: the socket transport was retired in 1.5.0")


def test_14x_every_marker_converted() -> None:
    _, new, env = migrated("14x-full.yaml")
    cfg = load_config_text(new + ENABLE, env).config
    assert [m.name for m in cfg.auth.modules("chain")] == ["keys", "oidc"]
    assert cfg.auth.modules("admin_auth")[0].token.env == "BUSBAR_ADMIN_TOKEN"
    assert cfg.auth.role_bindings["oidc"]["engineers"].allowed_pools == []
    assert cfg.auth.role_bindings["oidc"]["engineers"].group == "acme"
    assert cfg.groups["acme"].limits[0].model_dump(exclude_none=True) == {"budget": 100000, "per": "month"}
    assert cfg.groups["migrated-engineers"].limits[0].model_dump(exclude_none=True) == {"requests": 60,
                                                                                        "per": "minute"}
    assert (cfg.store.module, cfg.store.settings) == ("sqlite", {"db_path": "/var/lib/busbar/governance.db"})
    assert cfg.per_request_fee == 1
    assert cfg.providers["anthropic"].api_key.env == "ANTHROPIC_KEY"
    smart = cfg.pools["smart"]
    assert smart.hooks[0] == "cheapest" and smart.hooks[1].module == "socket-router-hook"
    assert [m.model for m in smart.members] == ["claude", "gpt-4o"]
    assert (smart.breaker.trip.window_secs, smart.breaker.trip.consecutive_n) == (30, 2)
    assert (smart.failover.timeout_secs, smart.failover.max_hops) == (30, 2)
    assert smart.on_exhausted.fallback_pool == "overflow" and cfg.pools["overflow"].on_exhausted == "least_bad"
    pii = cfg.global_hooks[0]
    assert (pii.module, pii.settings, pii.kind, pii.prompt, pii.on_error) == \
        ("busbar-webrequest-hook", {"url": "https://pii.internal/screen"}, "gate", "ro", "reject")
    assert cfg.observability.otlp_url == "http://localhost:4318/v1/traces"
    assert cfg.rate_card is not None and cfg.rate_card["gpt-4o"].input_utok == 0.0


def test_allowed_pools_empty_gets_the_loudest_warning_right_above_it() -> None:
    result, new, _ = migrated("14x-full.yaml")
    lines = new.split("\n")
    at = lines.index("        allowed_pools: []")
    assert lines[at - 1] == f"        # {FLIP_WARNING}"
    assert "WARNING(migrate): the MEANING of allowed_pools: [] FLIPPED" in FLIP_WARNING
    assert result.warnings == [f"auth.role_bindings.oidc.engineers.allowed_pools: {FLIP_WARNING}"]


def test_a_15_config_migrates_to_itself() -> None:
    text = (VALID / "001-full-annotated-example.yaml").read_text("utf-8").replace("\n---\n", "\n")
    result = migrate_text(text)
    assert (result.changes, result.todos, result.warnings) == ([], [], [])
    assert yaml.safe_load(result.yaml) == yaml.safe_load(text)
    again = migrate_text(result.yaml)
    assert again.yaml.split("\n", 1)[1] == result.yaml.split("\n", 1)[1]


def test_migrating_twice_changes_nothing_more() -> None:
    _, new, _ = migrated("14x-full.yaml")
    second = migrate_text(new)
    assert second.changes == [] and second.warnings == [FLIP_WARNING.join(["auth.role_bindings.oidc.engineers"
                                                                            ".allowed_pools: ", ""])]


def test_env_references_pass_through_untouched() -> None:
    old = ('providers:\n  internal:\n    base_url: "https://${LLM_HOST}/v1"\n    api_key_env: KEY\n'
           'models:\n  m: { provider: internal }\npools:\n  p:\n    members: [ { target: m } ]\n'
           '    route: webhook\n    policy: { url: "https://${HOOK_HOST}/rank" }\n')
    new = migrate_text(old).yaml
    assert "${LLM_HOST}" in new and "${HOOK_HOST}" in new
    cfg = load_config_text(new + ENABLE, {"LLM_HOST": "llm.example.com", "HOOK_HOST": "hooks.example.com",
                                          "KEY": "k"}).config
    assert cfg.providers["internal"].base_url == "https://llm.example.com/v1"
    assert cfg.pools["p"].hooks[0].settings == {"url": "https://hooks.example.com/rank"}


@pytest.mark.parametrize("route, todo", [
    ("script", "route: script (the embedded script engine) was removed in 1.3"),
    ("magic", "route: 'magic' is unknown"),
])
def test_routes_without_an_equivalent_leave_a_todo(route: str, todo: str) -> None:
    old = f"providers:\n  anthropic: {{ api_key_env: K }}\nmodels:\n  m: {{ provider: anthropic }}\n" \
          f"pools:\n  p:\n    route: {route}\n    members: [ {{ target: m }} ]\n"
    result = migrate_text(old)
    assert any(todo in t for t in result.todos)
    load_config_text(result.yaml, {"K": "k"})


def test_strategy_route_and_conflicting_member_prices() -> None:
    old = ("providers:\n  anthropic: { api_key_env: K }\nmodels:\n  m: { provider: anthropic }\n"
           "pools:\n  a: { route: cheapest, members: [ { target: m, cost_per_mtok: 3.0 } ] }\n"
           "  b: { members: [ { target: m, cost_per_mtok: 4.0 } ] }\n")
    result = migrate_text(old)
    cfg = load_config_text(result.yaml, {"K": "k"}).config
    assert cfg.pools["a"].hooks == ["cheapest"]
    assert cfg.rate_card is not None and cfg.rate_card["m"].input_utok == 3.0
    assert result.warnings == ["rate_card.m: pools.b.members[0] priced 'm' at 4.0/Mtok but another member at 3.0; "
                               "the first price was kept"]


def test_registry_on_error_names_become_hook_refs() -> None:
    old = ("hooks:\n  primary: { webhook: 'https://a.example.com/r', on_error: backup }\n"
           "  backup: { webhook: 'https://b.example.com/r', on_error: weighted }\n"
           "providers:\n  anthropic: { api_key_env: K }\nmodels:\n  m: { provider: anthropic }\n"
           "pools:\n  p: { hooks: [primary], members: [ { target: m } ] }\n")
    result = migrate_text(old)
    hooks = yaml.safe_load(result.yaml)["pools"]["p"]["hooks"]
    assert hooks[0]["on_error"] == {"hook": "busbar-webrequest-hook"}
    assert any("hook 'backup' was registered but used by no pool" in t for t in result.todos)


def test_unmigratable_input() -> None:
    with pytest.raises(MigrateError) as exc:
        migrate_text("- a\n- b\n", source="old.yaml")
    assert str(exc.value) == "old.yaml: not a YAML mapping (expected a Busbar config document)"
    with pytest.raises(MigrateError) as exc:
        migrate_text("a: [\n", source="old.yaml")
    assert str(exc.value).startswith("old.yaml:2: invalid YAML:")


# --- the emitter ---------------------------------------------------------------------------------------

_TEXT = st.one_of(st.sampled_from(["yes", "no", "null", "~", "123", "1e3", "0x1f", "a: b", "#x", "", " lead",
                                   "x,y", "[a]", "{a}", "${VAR}", "https://h/p?q=1#f", "tab\there", "line\nbreak",
                                   "é", "-", "? q", "*a", "&a", "!t", "@x", "`x", "'q'", '"q"', "%x"]),
                  st.text(max_size=8))
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _TEXT)
_TREE = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                    st.dictionaries(_TEXT, inner, max_size=3)), max_leaves=15)


@settings(max_examples=150, deadline=None)
@given(doc=st.dictionaries(_TEXT, _TREE, max_size=4))
def test_emitter_round_trips_any_document(doc: dict[Any, Any]) -> None:
    assert yaml.safe_load(render(doc, {}, ["header"])) == (doc or None)


def test_allowed_pools_empty_in_a_dropped_section_still_warns_at_the_top() -> None:
    old = ("governance:\n  keys: [ { name: ci, allowed_pools: [] } ]\n"
           "providers:\n  anthropic: { api_key_env: K }\nmodels:\n  m: { provider: anthropic }\n")
    result = migrate_text(old)
    assert result.warnings == [
        "1 allowed_pools: [] in 1.x sections that have no mechanical 1.5.0 home (1.x paths: "
        "governance.keys[0].allowed_pools): wherever you re-create them, [] now means NO pools (omit the key for "
        "all pools)"]
    assert result.yaml.split("\n")[3].startswith("# WARNING(migrate): 1 allowed_pools: []")
