"""The pluggy ABI: the six hookspecs are documented and typed, each has a test named after it, and
binding enforces the contract (check_pending, required hooks, transport version, kind).

Source: docs/plugins.md#the-abi (meta-test over the live hook relay).
"""
from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import pluggy
import pytest
from busbar.hooks.facade import INLINE_ATTRIBUTE, declares_inline
from busbar.loader import PluginCallError, PluginOpenError
from busbar.loader.registry import ASYNC_ATTRIBUTE
from busbar_sdk import TRANSPORT_VERSION, BindingError, HookPlugin, export_plugin, hookspec, wire
from busbar_sdk.artifact import bind_plugin

from tests.plugins.helpers import decide, make_cfg

hookimpl = pluggy.HookimplMarker("busbar")


def _relay_hooks() -> list[str]:
    pm = pluggy.PluginManager("busbar")
    pm.add_hookspecs(hookspec)
    return sorted(name for name in dir(pm.hook) if name.startswith("busbar_"))


def test_the_relay_holds_exactly_the_six_abi_hooks_and_the_optional_bind_state() -> None:
    assert _relay_hooks() == sorted(hookspec.HOOK_NAMES) == sorted(
        ["busbar_abi", "busbar_plugin_kind", "busbar_open", "busbar_bind_state", "busbar_call", "busbar_free",
         "busbar_close"])
    assert "busbar_bind_state" not in hookspec.REQUIRED_HOOKS


def test_the_capabilities_are_declared_but_not_on_the_relay() -> None:
    assert hookspec.CAPABILITY_NAMES == ("busbar_inline", "busbar_acall")
    assert hookspec.CAPABILITY_NAMES == (wire.INLINE_CAPABILITY, wire.ACALL_CAPABILITY)
    assert (INLINE_ATTRIBUTE, ASYNC_ATTRIBUTE) == hookspec.CAPABILITY_NAMES  # the kernel reads the same names
    assert not set(hookspec.CAPABILITY_NAMES) & set(_relay_hooks())


@pytest.mark.parametrize("name", hookspec.HOOK_NAMES + hookspec.CAPABILITY_NAMES)
def test_every_hookspec_is_documented_typed_and_tested(name: str) -> None:
    fn = getattr(hookspec, name)
    sig = inspect.signature(fn)
    assert sig.return_annotation is not inspect.Signature.empty, f"{name} lacks a return annotation"
    assert all(p.annotation is not inspect.Parameter.empty for p in sig.parameters.values()), name
    doc = inspect.getdoc(fn) or ""
    for must in ("When:", "Returns:", "On error:", "Grants:", "Source:", "Added: 1.5.0"):
        assert must in doc, f"{name}'s docstring lacks {must!r}"
    assert len(doc.splitlines()) >= 12, f"{name}'s docstring is too thin"
    tests = {n for n in globals() if n.startswith("test_")}
    assert f"test_{name}" in tests, f"no test named test_{name}"


def test_hookspec_signatures_match_the_issue() -> None:
    params = {n: list(inspect.signature(getattr(hookspec, n)).parameters) for n in hookspec.HOOK_NAMES}
    assert params == {"busbar_abi": [], "busbar_plugin_kind": [], "busbar_open": ["settings"],
                      "busbar_call": ["handle", "payload"], "busbar_free": ["handle", "obj"],
                      "busbar_close": ["handle"], "busbar_bind_state": ["handle", "state"]}


def _module(**hooks: Any) -> types.SimpleNamespace:
    base = {"busbar_abi": lambda: 1, "busbar_plugin_kind": lambda: "hook",
            "busbar_open": lambda settings: {"s": settings}, "busbar_call": lambda handle, payload: {}}
    base.update(hooks)
    return types.SimpleNamespace(**{k: hookimpl(v) for k, v in base.items() if v is not None})


# ------------------------------------------------------------------------ one test per hookspec

def test_busbar_abi() -> None:
    assert bind_plugin(_module(), name="ok").kind == "hook"
    with pytest.raises(BindingError, match=r"busbar_abi\(\) returned 2; this kernel speaks transport version 1"):
        bind_plugin(_module(busbar_abi=lambda: 2), name="x")
    with pytest.raises(BindingError, match=r"busbar_abi\(\) returned '1'"):
        bind_plugin(_module(busbar_abi=lambda: "1"), name="x")
    assert TRANSPORT_VERSION == 1


def test_busbar_plugin_kind() -> None:
    with pytest.raises(BindingError, match="kind mismatch: the manifest says 'secret' but the plugin reports 'hook'"):
        bind_plugin(_module(), name="x", expected_kind="secret")
    with pytest.raises(BindingError, match=r"busbar_plugin_kind\(\) returned 'export', not one of"):
        bind_plugin(_module(busbar_plugin_kind=lambda: "export"), name="x")

    def boom() -> str:
        raise RuntimeError("no")
    with pytest.raises(BindingError, match="the plugin raised while reporting its identity: RuntimeError: no"):
        bind_plugin(_module(busbar_plugin_kind=boom), name="x")


def test_busbar_open(pack, plugdir, keys, load) -> None:
    b = bind_plugin(_module(), name="x")
    assert b.open({"a": 1}) == {"s": {"a": 1}}
    pack(plugdir / "p.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    plugin = load(make_cfg(keys)).get("plain")
    inst = plugin.open({"threshold": 3})
    assert inst.handle == {"settings": {"threshold": 3}}

    def failing(settings: dict[str, Any]) -> object:
        raise ValueError("bad settings: threshold must be > 0")
    plugin.binding.open = failing  # type: ignore[union-attr]
    with pytest.raises(PluginOpenError, match=r"plugins/p.tar.gz: busbar_open raised ValueError: bad settings"):
        plugin.open({})
    plugin.binding.open = lambda settings: None  # type: ignore[union-attr]
    with pytest.raises(PluginOpenError, match="busbar_open returned None"):
        plugin.open({})


def test_busbar_call(pack, plugdir, keys, load) -> None:
    pack(plugdir / "p.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    plugin = load(make_cfg(keys)).get("plain")
    inst = plugin.open({})
    assert inst.call(decide(2)) == {"order": [0, 1], "v": 1}
    assert inst.call({"op": "future-op"}) == {}
    calls = iter([ValueError("db down"), ["not", "a", "dict"]])

    def broken(handle: object, payload: dict[str, Any]) -> Any:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value
    plugin.binding.call = broken  # type: ignore[union-attr]
    inst2 = plugin.open({})
    with pytest.raises(PluginCallError, match=r"plugins/p.tar.gz: busbar_call raised ValueError: db down") as err:
        inst2.call(decide())
    assert isinstance(err.value.__cause__, ValueError)
    with pytest.raises(PluginCallError, match="busbar_call returned list, not a dict"):
        inst2.call(decide())


def test_busbar_free(pack, plugdir, keys, load, caplog) -> None:
    freed: list[object] = []
    b = bind_plugin(_module(busbar_free=lambda handle, obj: freed.append(obj)), name="x")
    b.free("h", {"r": 1})
    assert freed == [{"r": 1}]
    assert bind_plugin(_module(), name="y").free("h", {}) is None  # optional: a no-op by default
    pack(plugdir / "p.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    inst = load(make_cfg(keys)).get("plain").open({})
    inst.release(inst.call(decide(1)))  # plain-hook implements no busbar_free: no-op

    def boom(handle: object, obj: object) -> None:
        raise RuntimeError("free failed")
    inst.plugin.binding.free = boom  # type: ignore[union-attr]
    inst.release({})
    assert any("busbar_free raised" in r.getMessage() for r in caplog.records)


def test_busbar_close(pack, plugdir, keys, load) -> None:
    pack(plugdir / "p.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    inst = load(make_cfg(keys)).get("plain").open({})
    inst.close()
    inst.close()  # once only
    assert inst.handle == {"settings": {}, "closed": True}
    assert bind_plugin(_module(), name="y").close("h") is None


def test_busbar_bind_state() -> None:
    assert bind_plugin(_module(), name="plain").bind_state is None          # optional: nothing to call
    got: list[Any] = []
    mod = _module()
    mod.busbar_bind_state = hookimpl(optionalhook=True)(lambda handle, state: got.append((handle, state)))
    binding = bind_plugin(mod, name="stateful")
    assert binding.bind_state is not None
    binding.bind_state("h", "state")
    assert got == [("h", "state")]
    old = pluggy.PluginManager("busbar")                 # a kernel that predates the hook: no spec for it
    old.add_hookspecs(types.SimpleNamespace(**{n: getattr(hookspec, n) for n in hookspec.HOOK_NAMES
                                               if n != "busbar_bind_state"}))
    old.register(mod, name="stateful")
    old.check_pending()                                  # optionalhook: loaded, never called

    class Plain(HookPlugin):
        pass

    class Stateful(HookPlugin):
        def bind_state(self, state: Any) -> None:
            self.state = state

    assert bind_plugin(export_plugin(Plain), name="plain-x").bind_state is None     # no override: not bound
    exported = bind_plugin(export_plugin(Stateful), name="stateful-x")
    inst = exported.open({})
    assert exported.bind_state is not None
    exported.bind_state(inst, "the state")
    assert inst.state == "the state"


# ----------------------------------------------------------------- one test per capability

def test_busbar_inline(pack, plugdir, keys, load) -> None:
    pack(plugdir / "p.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    inst = load(make_cfg(keys)).get("plain").open({})
    assert declares_inline(inst) is False
    inst.plugin.binding.call.busbar_inline = "yes"  # type: ignore[union-attr]  # only the bool True counts
    assert declares_inline(inst) is False
    inst.plugin.binding.call.busbar_inline = True  # type: ignore[union-attr]
    assert declares_inline(inst) is True


async def test_busbar_acall(pack, plugdir, keys, load) -> None:
    pack(plugdir / "p.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    plugin = load(make_cfg(keys)).get("plain")
    assert plugin.open({}).acall is None
    call = plugin.binding.call  # type: ignore[union-attr]

    async def twin(handle: object, payload: dict[str, Any]) -> dict[str, Any]:
        return {"order": [1, 0], "async": True}
    call.busbar_acall = twin
    try:
        inst = plugin.open({})
        assert inst.acall is not None
        assert await inst.acall(decide(2)) == {"order": [1, 0], "async": True}
        call.busbar_acall = lambda handle, payload: {}  # not a coroutine function: ignored
        assert plugin.open({}).acall is None
    finally:
        del call.busbar_acall


# ---------------------------------------------------------------------------- registration rules

def test_check_pending_refuses_a_misspelled_hook() -> None:
    mod = _module()
    mod.busbar_cal = hookimpl(lambda handle, payload: {})
    with pytest.raises(BindingError, match="busbar_cal"):
        bind_plugin(mod, name="typo")


def test_a_missing_required_hook_is_refused() -> None:
    with pytest.raises(BindingError, match=r"does not implement busbar_call \(required by the ABI\)"):
        bind_plugin(_module(busbar_call=None), name="x")


def test_wrappers_are_not_part_of_the_abi() -> None:
    mod = _module()
    mod.busbar_call = pluggy.HookimplMarker("busbar")(wrapper=True)(lambda handle, payload: (yield))
    with pytest.raises(BindingError, match="busbar_call is implemented as a wrapper"):
        bind_plugin(mod, name="x")


def test_a_bad_hookimpl_signature_is_refused() -> None:
    with pytest.raises(BindingError, match="does not fit the ABI"):
        bind_plugin(_module(busbar_call=lambda handle, payload, extra: {}), name="x")


def test_sdk_export_and_plain_pluggy_bind_the_same_way() -> None:
    class Gate(HookPlugin):
        def decide(self, message: Any) -> Any:
            return {"order": [c.idx for c in message.candidates][::-1]}
    b = bind_plugin(export_plugin(Gate), name="gate", expected_kind="hook")
    assert b.call(b.open({}), decide(2)) == {"order": [1, 0]}
    assert sys.modules.get("busbar_sdk.hookspec") is hookspec
