"""Boot-time hook faults against the loaded plugin set: one exact line each, all at once.

Source: docs/configuration.md#startup-checks (hook rows), docs/hooks.md#configuring.
docs/hooks.md#fail-safety (on_error chains proven terminating).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from busbar.config.schema import DeploymentConfig
from busbar.hooks import HookBootError, check

from tests.unit.hooks.conftest import FakePlugin, FakePlugins

REPO = Path(__file__).resolve().parents[3]

BASE = """
plugins: { enabled: true, dir: plugins }
providers: { oa: { protocol: openai, base_url: "https://api.openai.com", api_key: { env: K } } }
models: { big: { provider: oa } }
"""


def cfg(text: str, enabled: bool = True) -> DeploymentConfig:
    raw = yaml.safe_load(BASE + text)
    raw["plugins"]["enabled"] = enabled
    return DeploymentConfig.model_validate(raw)


#: The first-party forwarder's real settings schema (it marks settings.url x-busbar-egress-url and
#: settings.allow_hosts x-busbar-egress-allow): the kernel checks it through the manifest, not by name.
WEBREQUEST_SCHEMA = (REPO / "plugins" / "busbar-webrequest-hook" / "src" / "busbar_webrequest_hook"
                     / "settings_schema.json").read_text()
#: Any other plugin declaring the same keywords gets the same checks.
ACME_SCHEMA = json.dumps({"type": "object", "required": ["endpoint"], "properties": {
    "endpoint": {"type": "string", "x-busbar-egress-url": True, "description": "Where decisions are sent. More."},
    "exceptions": {"type": "array", "items": {"type": "string"}, "x-busbar-egress-allow": True},
    "mirror": {"type": "string", "x-busbar-egress-url": True}}})
PLUGINS = FakePlugins({"g": FakePlugin("g", lambda p, s: {}), "t": FakePlugin("t", lambda p, s: {}),
                       "busbar-webrequest-hook": FakePlugin("busbar-webrequest-hook", lambda p, s: {},
                                                            settings_schema=WEBREQUEST_SCHEMA),
                       "acme-forwarder": FakePlugin("acme-forwarder", lambda p, s: {}, settings_schema=ACME_SCHEMA),
                       "plain": FakePlugin("plain", lambda p, s: {}),
                       "vault": FakePlugin("vault", lambda p, s: {}, kind="secret")})


@pytest.mark.parametrize("text,faults", [
    ("pools: { p: { hooks: [ { module: x } ], members: [ { model: big } ] } }",
     [("config.yaml: pools.p.hooks[0].module: 'x' is not a loaded kind: hook plugin; install its tarball in "
      "plugins.dir")]),
    ("pools: { p: { hooks: [ { module: vault } ], members: [ { model: big } ] } }",
     [("config.yaml: pools.p.hooks[0].module: 'vault' is a kind: secret plugin, not a kind: hook plugin; name a "
      "kind: hook plugin")]),
    ("pools: { p: { hooks: [ fastest, cheapest, fancy ], members: [ { model: big } ] } }",
     [("config.yaml: pools.p.hooks[2]: 'fancy' is not a built-in strategy (weighted, cheapest, fastest, "
      "least_busy, usage); an out-of-process hook is an inline { module: ... } ref"),
      ("config.yaml: pools.p.hooks: names more than one ordering strategy (fastest, cheapest); a pool has one base "
      "ordering: keep one")]),
    ("global_hooks: [ cheapest ]\npools: {}",
     [("config.yaml: global_hooks[0]: 'cheapest' is a bare name; global_hooks takes inline { module: <hook plugin> "
      "} refs (an ordering strategy belongs in a pool's hooks: list)")]),
    ("global_hooks: [ { module: t, prompt: rw } ]\npools: {}",
     [("config.yaml: global_hooks[0].prompt: rw is not allowed on a tap (a tap never replies); use ro, or kind: "
      "gate")]),
    ("pools: { p: { hooks: [ { module: g, on_error: sometimes } ], members: [ { model: big } ] } }",
     [("config.yaml: pools.p.hooks[0].on_error: 'sometimes' is not an on_error value; use nothing, weighted, first, "
      "reject, a strategy name, or { hook: sometimes } for a named fallback")]),
    ("pools: { p: { hooks: [ { module: g, on_error: { hook: nope } } ], members: [ { model: big } ] } }",
     [("config.yaml: pools.p.hooks[0].on_error.hook: unknown hook 'nope' in the on_error chain (hooks in scope: g); "
      "name one of them, a strategy, or a terminal (nothing, weighted, first, reject)")]),
    (("global_hooks: [ { module: t } ]\npools: { p: { hooks: [ { module: g, on_error: { hook: t } } ], "
     "members: [ { model: big } ] } }"),
     [("config.yaml: pools.p.hooks[0].on_error.hook: 't' is a tap; a tap never decides, so it cannot be an on_error "
      "fallback; name a gate or a terminal")]),
    (("pools: { p: { hooks: [ { module: g, on_error: { hook: t } }, { module: t, on_error: { hook: g } } ], "
     "members: [ { model: big } ] } }"),
     [("config.yaml: pools.p.hooks[0].on_error.hook: on_error cycle g -> t -> g; end the chain with a terminal "
      "(nothing, weighted, first, reject)"),
      ("config.yaml: pools.p.hooks[1].on_error.hook: on_error cycle t -> g -> t; end the chain with a terminal "
      "(nothing, weighted, first, reject)")]),
    (("pools: { p: { hooks: [ { module: busbar-webrequest-hook, settings: { url: 'http://10.0.0.5/rank' } } ], "
     "members: [ { model: big } ] } }"), None),
    ("pools: { p: { hooks: [ { module: busbar-webrequest-hook } ], members: [ { model: big } ] } }",
     [("config.yaml: pools.p.hooks[0].settings.url: required by busbar-webrequest-hook (The sidecar endpoint every "
       "message is POSTed to); add settings: { url: ... }")]),
], ids=["unloaded", "wrong-kind", "strategies", "bare-global", "rw-tap", "bad-on-error", "unknown-fallback",
        "tap-fallback", "cycle", "ssrf", "no-url"])
def test_boot_faults(text, faults):
    got = check(cfg(text), PLUGINS)
    if faults is None:                       # the SSRF guard's own wording; pin the key path and verdict
        (line,) = got
        assert line.startswith("config.yaml: pools.p.hooks[0].settings.url: ") and "10.0.0.5" in line
    else:
        assert got == faults


@pytest.mark.parametrize("url", ["http://127.0.0.1:8731/route", "https://router.internal/rank",
                                 "http://localhost:9000/x"])
def test_loopback_and_remote_https_sidecars_pass(url):
    assert check(cfg(f"pools: {{ p: {{ hooks: [ {{ module: busbar-webrequest-hook, settings: {{ url: '{url}' }} }} ], "
                     f"members: [ {{ model: big }} ] }} }}"), PLUGINS) == []


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/", "http://192.168.1.10/x", "http://100.64.0.1/x",
                                 "http://router.example.com/x"])
def test_blocked_sidecar_urls(url):
    (line,) = check(cfg(f"pools: {{ p: {{ hooks: [ {{ module: busbar-webrequest-hook, settings: {{ url: '{url}' }} "
                        f"}} ], members: [ {{ model: big }} ] }} }}"), PLUGINS)
    assert line.startswith("config.yaml: pools.p.hooks[0].settings.url: ")


def _hook(module: str, settings: str) -> DeploymentConfig:
    return cfg(f"pools: {{ p: {{ hooks: [ {{ module: {module}, settings: {settings} }} ], "
               f"members: [ {{ model: big }} ] }} }}")


def test_any_plugin_is_judged_by_its_manifest_schema_not_by_name():
    assert check(_hook("acme-forwarder", "{}"), PLUGINS) == [
        "config.yaml: pools.p.hooks[0].settings.endpoint: required by acme-forwarder (Where decisions are sent); "
        "add settings: { endpoint: ... }"]
    assert check(_hook("acme-forwarder", "{ endpoint: 'https://10.0.0.5/x', mirror: 'http://169.254.169.254/' }"),
                 PLUGINS) == [
        "config.yaml: pools.p.hooks[0].settings.endpoint: 10.0.0.5 is a private (RFC 1918 / unique-local) address; "
        "refused by the SSRF guard (only loopback or public https:// endpoints are allowed here)",
        "config.yaml: pools.p.hooks[0].settings.mirror: 169.254.169.254 is a cloud-metadata endpoint; refused by "
        "the SSRF guard (list it in settings.exceptions only if this is deliberate)"]
    assert check(_hook("acme-forwarder", "{ endpoint: 42 }"), PLUGINS) == [
        "config.yaml: pools.p.hooks[0].settings.endpoint: must be a URL string, found 42"]
    # no schema keywords: nothing checked, whatever the settings hold
    assert check(_hook("plain", "{ url: 'http://169.254.169.254/' }"), PLUGINS) == []


def test_the_instances_own_allow_list_is_its_only_exception():
    ok = "{ endpoint: 'http://10.0.0.5/x', exceptions: [ '10.0.0.5' ] }"
    assert check(_hook("acme-forwarder", ok), PLUGINS) == []
    assert check(_hook("busbar-webrequest-hook", "{ url: 'http://10.0.0.5/x', allow_hosts: [ '10.0.0.0/8' ] }"),
                 PLUGINS) == []
    # another instance (and every provider) without the list is still refused
    text = ("pools: { p: { hooks: [ { module: acme-forwarder, settings: " + ok + " }, "
            "{ module: busbar-webrequest-hook, settings: { url: 'http://10.0.0.5/y' } } ], members: [ { model: big } ] } }")
    assert check(cfg(text), PLUGINS) == [
        "config.yaml: pools.p.hooks[1].settings.url: 10.0.0.5 is a private (RFC 1918 / unique-local) address; "
        "refused by the SSRF guard (only loopback or public https:// endpoints are allowed here)"]
    assert check(_hook("acme-forwarder", "{ endpoint: 'http://127.0.0.1/x', exceptions: 'all' }"), PLUGINS) == [
        "config.yaml: pools.p.hooks[0].settings.exceptions: must be a list of host names, IP addresses or CIDRs"]


def test_plugins_disabled_and_no_plugin_set():
    text = "pools: { p: { hooks: [ { module: g } ], members: [ { model: big } ] } }"
    assert check(cfg(text, enabled=False), None) == [
        ("config.yaml: pools.p.hooks[0].module: 'g' is a kind: hook plugin but plugins.enabled is false; set "
        "plugins.enabled: true and install its tarball in plugins.dir")]
    assert check(cfg(text), None) == [
        ("config.yaml: pools.p.hooks[0].module: 'g' is not a loaded kind: hook plugin; install its tarball in "
        "plugins.dir")]


def test_chains_to_terminals_and_strategies_pass():
    text = ("global_hooks: [ { module: g, kind: gate, on_error: { hook: reject } } ]\n"
            "pools: { p: { hooks: [ { module: t, on_error: { hook: g } }, { module: g, on_error: { hook: cheapest } } ],"
            " members: [ { model: big } ] } }")
    assert check(cfg(text), PLUGINS) == []


async def test_a_gateway_refuses_to_build_with_faults(bed_factory):
    with pytest.raises(HookBootError) as e:
        bed_factory("pools: { p: { hooks: [ { module: ghost } ], members: [ { model: big } ] } }", {"g": None})
    assert e.value.faults == [("config.yaml: pools.p.hooks[0].module: 'ghost' is not a loaded kind: hook plugin; "
                              "install its tarball in plugins.dir")]
