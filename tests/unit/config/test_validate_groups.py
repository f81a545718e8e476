"""Startup validation rows for groups:, their limits and rate_card: (docs/config-at-a-glance.md#groups,
docs/config-at-a-glance.md#rate_card, docs/configuration.md#startup-checks): one minimal config per row, the exact
line."""
from __future__ import annotations

import textwrap

import pytest
import yaml
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text

ENV = {"K": "sk-test"}
BASE = """\
providers:
  anthropic: { api_key: { env: K } }
  openai: { api_key: { env: K } }
models:
  claude: { provider: anthropic }
  gpt-4o: { provider: openai }
pools:
  frontier: { members: [ { model: claude } ] }
  value: { members: [ { model: gpt-4o } ] }
"""


def faults(extra: str) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text(BASE + textwrap.dedent(extra), ENV)
    return exc.value.faults


def test_missing_parent_prints_a_paste_ready_stub() -> None:
    lines = faults("groups:\n  bob: { parent: acme }\n")
    assert lines == ["config.yaml: groups.bob.parent: 'acme' is not a configured group; add it (paste under "
                     "groups:) acme: { limits: [] }  or fix the name"]
    stub = lines[0].split("(paste under groups:) ")[1].split("  or fix")[0]
    fixed = load_config_text(BASE + "groups:\n  bob: { parent: acme }\n  " + stub + "\n", ENV)
    assert fixed.config.groups["acme"].limits == []


def test_group_cycle_prints_the_path_once() -> None:
    assert faults("groups:\n  a: { parent: c }\n  b: { parent: a }\n  c: { parent: b }\n  d: { parent: a }\n") == [
        "config.yaml: groups.a.parent: group cycle a -> c -> b -> a; remove one parent to break it"]
    assert faults("groups:\n  a: { parent: a }\n") == [
        "config.yaml: groups.a.parent: 'a' is its own parent; remove parent: or name another group"]


def test_chain_deeper_than_8() -> None:
    names = [f"g{i}" for i in range(10)]   # g0 is the root; g9 is 10 groups deep
    groups = "groups:\n" + "".join(f"  {n}: {{ parent: {names[i - 1]} }}\n" if i else f"  {n}: {{}}\n"
                                   for i, n in enumerate(names))
    assert faults(groups) == [
        "config.yaml: groups.g8.parent: the chain g8 -> g7 -> g6 -> g5 -> g4 -> g3 -> g2 -> g1 -> g0 is 9 groups "
        "deep; at most 8 are allowed: re-parent a group closer to the root"]
    load_config_text(BASE + "groups:\n" + "".join(
        f"  {n}: {{ parent: {names[i - 1]} }}\n" if i else f"  {n}: {{}}\n" for i, n in enumerate(names[:8])), ENV)


@pytest.mark.parametrize("limit, line", [
    ("{ requests: 10, tokens: 100, per: minute }",
     "groups.g.limits[0]: a limit has exactly one metric key (requests, tokens, budget or concurrent), found "
     "requests, tokens; write one limit per metric"),
    ("{ per: minute }",
     "groups.g.limits[0]: a limit has exactly one metric key (requests, tokens, budget or concurrent), found "
     "none; write one limit per metric"),
    ("{ budget: 5000 }",
     "groups.g.limits[0].per: budget needs a window; add per: minute | hour | day | month | total"),
    ("{ concurrent: 5, per: minute }",
     "groups.g.limits[0].per: concurrent is instantaneous and takes no per:; remove it"),
    ("{ concurrent: 5, pool: frontier }",
     "groups.g.limits[0].pool: concurrent takes no pool: (the in-flight gauge is per group); remove it"),
    ("{ requests: -1, per: day }", "groups.g.limits[0].requests: -1 is negative; must be ≥ 0"),
    ("{ budget: 5000, per: month, pool: fronteir }",
     "groups.g.limits[0].pool: 'fronteir' is not a configured pool (it would be an unenforced budget); fix the "
     "name or remove pool:"),
    ("{ budget: 5000, per: month, pool: frontier, on_exhaust: downgrade }",
     "groups.g.limits[0].downgrade_to: required by on_exhaust: downgrade; name the cheaper pool"),
    ("{ budget: 5000, per: month, pool: frontier, on_exhaust: downgrade, downgrade_to: frontier }",
     "groups.g.limits[0].downgrade_to: 'frontier' is the limit's own pool; name a different pool"),
    ("{ budget: 5000, per: month, pool: frontier, on_exhaust: downgrade, downgrade_to: cheap }",
     "groups.g.limits[0].downgrade_to: 'cheap' is not a configured pool; fix the name"),
    ("{ requests: 5, per: month, pool: frontier, on_exhaust: downgrade, downgrade_to: value }",
     "groups.g.limits[0].on_exhaust: downgrade applies to a budget limit only; use it on { budget: N, per: ..., "
     "pool: ... }"),
    ("{ budget: 5, per: month, on_exhaust: downgrade, downgrade_to: value }",
     "groups.g.limits[0].on_exhaust: downgrade needs a pool: scope (the pool being downgraded from)"),
    ("{ budget: 5, per: month, pool: frontier, downgrade_to: value }",
     "groups.g.limits[0].downgrade_to: only meaningful with on_exhaust: downgrade; add it or remove downgrade_to"),
], ids=["two-metrics", "no-metric", "no-window", "concurrent-per", "concurrent-pool", "negative",
        "pool-dangling", "downgrade-no-target", "downgrade-self", "downgrade-unknown", "downgrade-not-budget",
        "downgrade-no-scope", "downgrade-to-alone"])
def test_malformed_limit(limit: str, line: str) -> None:
    assert faults(f"groups:\n  g:\n    limits:\n      - {limit}\n") == [f"config.yaml: {line}"]


def test_child_default_limits_are_checked_like_any_other() -> None:
    assert faults("groups:\n  org: { child_default: { limits: [ { budget: 500 } ] } }\n") == [
        "config.yaml: groups.org.child_default.limits[0].per: budget needs a window; add per: minute | hour | day "
        "| month | total"]


def test_empty_group_entry_is_an_inherit_only_group() -> None:
    cfg = load_config_text(BASE + "groups:\n  org:\n  accounting: { parent: org }\n", ENV).config
    assert cfg.groups["org"].enabled is True and cfg.groups["org"].limits == []


def test_rate_card_incomplete_prints_a_zeroed_stub_of_exactly_the_missing_models() -> None:
    lines = faults("rate_card:\n  claude: { input_utok: 3.0, output_utok: 15.0 }\n")
    assert lines == ["config.yaml: rate_card: no entry for model 'gpt-4o' (a present rate_card must price every "
                     "configured model); paste under rate_card:  gpt-4o: { input_utok: 0.0, output_utok: 0.0 }"]
    stub = lines[0].split("paste under rate_card:  ")[1]
    assert yaml.safe_load(stub) == {"gpt-4o": {"input_utok": 0.0, "output_utok": 0.0}}


def test_rate_card_quotes_keys_that_need_it_and_rejects_negative_rates() -> None:
    text = BASE.replace("gpt-4o: { provider: openai }", "'yes': { provider: openai }").replace(
        "model: gpt-4o", "model: 'yes'")
    with pytest.raises(ConfigError) as exc:
        load_config_text(text + "rate_card:\n  claude: { input_utok: -1 }\n", ENV)
    assert exc.value.faults == [
        "config.yaml: rate_card.claude.input_utok: -1.0 is not allowed; a rate is a finite number ≥ 0",
        "config.yaml: rate_card: no entry for model 'yes' (a present rate_card must price every configured "
        "model); paste under rate_card:  'yes': { input_utok: 0.0, output_utok: 0.0 }"]


def test_absent_rate_card_prices_nothing_and_per_request_fee_default() -> None:
    cfg = load_config_text(BASE, ENV).config
    assert cfg.rate_card is None and cfg.per_request_fee == 0
    assert faults("per_request_fee: -1\n") == [
        "config.yaml: per_request_fee: -1 is negative; must be ≥ 0 (default 0)"]


def test_a_budget_that_can_never_bind_is_warned() -> None:
    groups = "groups:\n  acme:\n    limits: [ { budget: 1, per: month }, { requests: 5, per: day } ]\n"
    never = ("config.yaml: groups.acme.limits[0].budget: no rate_card and per_request_fee 0: every request's spend "
             "is 0, so this budget never binds; add a rate_card (or a per_request_fee)")
    assert never in load_config_text(BASE + groups, ENV).warnings
    fee = load_config_text(BASE + groups + "per_request_fee: 1\n", ENV).warnings
    card = load_config_text(BASE + groups + "rate_card:\n  claude: { input_utok: 1.0 }\n  gpt-4o: { input_utok: 1.0 }\n",
                            ENV).warnings
    assert never not in fee and never not in card
