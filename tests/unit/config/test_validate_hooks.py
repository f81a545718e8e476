"""Startup validation rows for pool hooks and global_hooks (docs/configuration.md, docs/hooks.md#configuring,
docs/configuration.md#startup-checks; docs/plugins.md#grants, docs/hooks.md#fail-safety)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text
from busbar.config.schema import HookRef

ENV = {"K": "sk-test"}
BASE = """\
providers:
  anthropic: { api_key: { env: K } }
models:
  claude: { provider: anthropic }
"""
PLUGINS = "plugins: { enabled: true }\n"


def pool(hooks: str, extra: str = PLUGINS) -> str:
    return BASE + extra + f"pools:\n  p:\n    members: [ {{ model: claude }} ]\n    hooks: {hooks}\n"


def faults(text: str, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text(textwrap.dedent(text), ENV, **kw)  # type: ignore[arg-type]
    return exc.value.faults


class Catalog:
    """A stand-in for the loader's manifest-only plugin catalog."""

    def __init__(self, **kinds: str):
        self.kinds = {k.replace("_", "-"): v for k, v in kinds.items()}

    def kind_of(self, name: str) -> str | None:
        return self.kinds.get(name)


def test_more_than_one_ordering_strategy() -> None:
    assert faults(pool("[cheapest, fastest]")) == [
        "config.yaml: pools.p.hooks: names more than one ordering strategy (cheapest, fastest); a pool has one "
        "base ordering: keep one"]


def test_bare_name_not_a_strategy() -> None:
    assert faults(pool("[cheapest, smart-router]")) == [
        "config.yaml: pools.p.hooks[1]: 'smart-router' is not a built-in strategy (weighted, cheapest, fastest, "
        "least_busy, usage); an out-of-process hook is an inline { module: ... } ref"]


def test_hook_plugin_subsystem_disabled() -> None:
    assert faults(pool("[ { module: busbar-headroom-hook } ]", extra="")) == [
        "config.yaml: pools.p.hooks[0].module: 'busbar-headroom-hook' is a kind: hook plugin but plugins.enabled "
        "is false; set plugins.enabled: true and install its tarball in plugins.dir"]


def test_unknown_hook_module_with_the_loaders_catalog() -> None:
    text = pool("[ { module: busbar-headroom-hook }, { module: acme-store } ]")
    assert faults(text, plugins=Catalog(busbar_headroom_hook="hook", acme_store="store")) == [
        "config.yaml: pools.p.hooks[1].module: 'acme-store' is a kind: store plugin, not a kind: hook plugin; "
        "name a kind: hook plugin"]
    assert faults(text, plugins=Catalog()) == [
        "config.yaml: pools.p.hooks[0].module: 'busbar-headroom-hook' does not resolve to a loadable plugin in "
        "plugins.dir (plugins); install its signed tarball or fix the name (busbar --list-plugins shows what loads)",
        "config.yaml: pools.p.hooks[1].module: 'acme-store' does not resolve to a loadable plugin in plugins.dir "
        "(plugins); install its signed tarball or fix the name (busbar --list-plugins shows what loads)"]


def test_prompt_rw_on_a_tap() -> None:
    assert faults(pool("[ { module: audit, kind: tap, prompt: rw } ]")) == [
        "config.yaml: pools.p.hooks[0].prompt: rw is not allowed on a tap (a tap never replies); use ro, or kind: "
        "gate"]
    # in global_hooks an unmarked ref is a tap
    assert faults(BASE + PLUGINS + "global_hooks: [ { module: audit, prompt: rw } ]\n") == [
        "config.yaml: global_hooks[0].prompt: rw is not allowed on a tap (a tap never replies); use ro, or kind: "
        "gate"]


WEBREQUEST_SCHEMA = (Path(__file__).resolve().parents[3] / "plugins" / "busbar-webrequest-hook" / "src"
                     / "busbar_webrequest_hook" / "settings_schema.json").read_text()


class SchemaCatalog(Catalog):
    """A catalog that also serves manifest settings schemas (name and alias of one plugin)."""

    def __init__(self, **kinds: str):
        super().__init__(**kinds)
        self.schemas = {"busbar-webrequest-hook": WEBREQUEST_SCHEMA, "busbar-webrequest": WEBREQUEST_SCHEMA}

    def settings_schema_of(self, name: str) -> str | None:
        return self.schemas.get(name)


WEBREQUEST = SchemaCatalog(busbar_webrequest_hook="hook", busbar_webrequest="hook", audit="hook")


@pytest.mark.parametrize("url, reason", [
    ("https://10.0.0.5/rank", "10.0.0.5 is a private (RFC 1918 / unique-local) address; refused by the SSRF "
                              "guard (only loopback or public https:// endpoints are allowed here)"),
    ("https://100.64.0.9/rank", "100.64.0.9 is a carrier-grade NAT (100.64.0.0/10) address; refused by the SSRF "
                                "guard (only loopback or public https:// endpoints are allowed here)"),
    ("https://169.254.10.10/rank", "169.254.10.10 is a cloud-metadata endpoint; refused by the SSRF guard (list "
                                   "it in settings.allow_hosts only if this is deliberate)"),
    ("http://router.example.com/rank", "uses http:// with a non-loopback host (router.example.com): remote "
                                       "endpoints must use https://"),
], ids=["rfc1918", "cgnat", "link-local-metadata", "remote-http"])
@pytest.mark.parametrize("module", ["busbar-webrequest-hook", "busbar-webrequest"])
def test_an_egress_url_setting_is_ssrf_guarded_from_the_manifest(module: str, url: str, reason: str) -> None:
    assert faults(pool(f"[ {{ module: {module}, settings: {{ url: '{url}' }} }} ]"), plugins=WEBREQUEST) == [
        f"config.yaml: pools.p.hooks[0].settings.url: {reason}"]


def test_loopback_allowed_required_key_and_the_instances_own_allow_list() -> None:
    load_config_text(pool("[ { module: busbar-webrequest-hook, settings: { url: 'http://127.0.0.1:8787/' } } ]"),
                     ENV, plugins=WEBREQUEST)
    load_config_text(pool("[ { module: busbar-webrequest-hook, settings: { url: 'http://10.1.1.1/',"
                          " allow_hosts: [ 10.1.1.1 ] } } ]"), ENV, plugins=WEBREQUEST)
    assert faults(pool("[ { module: busbar-webrequest-hook } ]"), plugins=WEBREQUEST) == [
        "config.yaml: pools.p.hooks[0].settings.url: required by busbar-webrequest-hook (The sidecar endpoint "
        "every message is POSTed to); add settings: { url: ... }"]
    assert faults(BASE + PLUGINS + "global_hooks: [ { module: busbar-webrequest, settings: { url: 'https://10.1.1.1' } } ]\n",
                  plugins=WEBREQUEST) == [
        "config.yaml: global_hooks[0].settings.url: 10.1.1.1 is a private (RFC 1918 / unique-local) address; "
        "refused by the SSRF guard (only loopback or public https:// endpoints are allowed here)"]


def test_no_plugin_is_special_cased_by_name() -> None:
    """Without the manifests (no catalog, or one that serves no schemas) nothing is known about a
    plugin's settings: the kernel has no by-name rule for the forwarder."""
    text = pool("[ { module: busbar-webrequest-hook, settings: { url: 'https://10.0.0.5/rank' } } ]")
    load_config_text(text, ENV)
    load_config_text(text, ENV, plugins=Catalog(busbar_webrequest_hook="hook"))
    assert len(faults(text, plugins=WEBREQUEST)) == 1


def test_on_error_chain_must_terminate() -> None:
    unknown = pool("[ { module: router, on_error: { hook: backup } } ]")
    assert faults(unknown) == [
        "config.yaml: pools.p.hooks[0].on_error.hook: unknown hook 'backup' in the on_error chain (hooks in scope: "
        "router); name one of them, a strategy, or a terminal (nothing, weighted, first, reject)"]
    tap = BASE + PLUGINS + ("global_hooks: [ { module: audit } ]\n"
                            "pools:\n  p:\n    members: [ { model: claude } ]\n"
                            "    hooks: [ { module: router, on_error: { hook: audit } } ]\n")
    assert faults(tap) == [
        "config.yaml: pools.p.hooks[0].on_error.hook: 'audit' is a tap; a tap never decides, so it cannot be an "
        "on_error fallback; name a gate or a terminal"]
    cycle = pool("[ { module: a, on_error: { hook: b } }, { module: b, on_error: { hook: c } }, "
                 "{ module: c, on_error: { hook: a } } ]")
    assert faults(cycle) == [
        f"config.yaml: pools.p.hooks[{i}].on_error.hook: on_error cycle {path}; end the chain with a terminal "
        f"(nothing, weighted, first, reject)"
        for i, path in enumerate(["a -> b -> c -> a", "b -> c -> a -> b", "c -> a -> b -> c"])]


def test_on_error_chains_that_terminate() -> None:
    text = pool("[ cheapest, { module: a, on_error: { hook: b } }, { module: b, on_error: { hook: fastest } }, "
                "{ module: c, on_error: reject }, { module: d, on_error: first } ]")
    cfg = load_config_text(text, ENV).config
    refs = [h for h in cfg.pools["p"].hooks if isinstance(h, HookRef)]
    assert [r.on_error if isinstance(r.on_error, str) else r.on_error.hook for r in refs] == \
        ["b", "fastest", "reject", "first"]


def test_on_error_bare_unknown_value() -> None:
    assert faults(pool("[ { module: a, on_error: backup } ]")) == [
        "config.yaml: pools.p.hooks[0].on_error: 'backup' is not an on_error value; use nothing, weighted, first, "
        "reject, a strategy name, or { hook: backup } for a named fallback"]


def test_global_hooks_take_refs_only_and_bare_no_is_the_no_grant() -> None:
    assert faults(BASE + PLUGINS + "global_hooks: [cheapest]\n") == [
        "config.yaml: global_hooks[0]: 'cheapest' is a bare name; global_hooks takes inline { module: <hook plugin> "
        "} refs (an ordering strategy belongs in a pool's hooks: list)"]
    cfg = load_config_text(BASE + PLUGINS + "global_hooks: [ { module: a, kind: gate, prompt: no, user: no } ]\n",
                           ENV).config
    ref = cfg.global_hooks[0]
    assert isinstance(ref, HookRef) and (ref.prompt, ref.user) == ("no", "no")
    assert ref.effective_kind(in_global=True) == "gate"


def test_hook_ref_defaults_are_the_seeds() -> None:
    """Module-ref typed fields (docs/hooks.md#configuring): timeout_ms 1, on_error nothing, on_empty reject,
    prompt/user no, priority 0, at request; kind gate in a pool list, tap in global_hooks."""
    ref = HookRef(module="m")
    assert (ref.timeout_ms, ref.on_error, ref.on_empty, ref.prompt, ref.user, ref.priority, ref.at) == \
        (1, "nothing", "reject", "no", "no", 0, "request")
    assert ref.effective_kind(in_global=False) == "gate" and ref.effective_kind(in_global=True) == "tap"


def test_hook_field_shapes() -> None:
    assert faults(pool("[ { module: a, timeout_ms: 0, on_empty: allow } ]")) == [
        "config.yaml: pools.p.hooks[0].on_empty: 'allow' is not allowed; use 'reject' or 'weighted'"]
    assert faults(pool("[ { module: a, timeout_ms: 0 } ]")) == [
        "config.yaml: pools.p.hooks[0].timeout_ms: must be ≥ 1 (a gate's deadline in ms; default 1)"]
    assert faults(pool("[ 5 ]")) == [
        "config.yaml: pools.p.hooks[0]: must be a built-in strategy name (weighted, cheapest, fastest, least_busy, "
        "usage) or an inline { module: <hook plugin>, settings: {...} } ref, found 5"]
