"""The sdk: pinned public surface, typed wire models and reply arms, base classes turning
busbar_call into typed methods, grants enforced by the kernel, secret references through a secret
plugin, the testing harness and the HTTP sidecar (the same class, out of process).

Source: docs/hooks.md#what-a-hook-receives, docs/hooks.md#what-a-gate-may-answer, docs/hooks.md#management-messages,
docs/plugins.md#grants; docs/config-at-a-glance.md#providers (``{ module: <secret-plugin> }``).
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, ClassVar

import busbar_sdk
import pytest
from busbar.loader import PluginCallError, SecretResolutionError
from busbar.loader.registry import effective_grant
from busbar.loader.secrets import SecretModuleResolver
from busbar_sdk import (
    DictHookPlugin,
    HookPlugin,
    Order,
    PayloadError,
    Reject,
    Restrict,
    Rewrite,
    StorePlugin,
    export_plugin,
)
from busbar_sdk.artifact import bind_plugin
from busbar_sdk.models import (
    Abstain,
    BodyMessage,
    ConfigureAck,
    DecideMessage,
    Metric,
    StatusReply,
    message_op,
    parse_hook_message,
    parse_hook_reply,
)
from busbar_sdk.sidecar import start
from busbar_sdk.testing import assert_hook_conformance

from tests.plugins.helpers import decide, make_cfg


def test_public_surface_is_pinned() -> None:
    assert sorted(busbar_sdk.__all__) == sorted([
        "AUTH_ABI_VERSION", "Abstain", "ArtifactError", "AuthPlugin", "BindingError", "BuildError", "DictHookPlugin",
        "HOOK_ABI_VERSION", "HookPlugin", "HostileArchiveError", "Order", "PayloadError", "Plugin", "PluginBinding",
        "PluginExport", "Reject", "Restrict", "Rewrite", "SECRET_ABI_VERSION", "STORE_ABI_VERSION", "SdkError",
        "SecretPlugin", "SigningError", "StorePlugin", "TRANSPORT_VERSION", "export_plugin", "hookimpl"])
    for name in busbar_sdk.__all__:
        assert hasattr(busbar_sdk, name)
    assert busbar_sdk.HOOK_ABI_VERSION == 1


def test_message_discrimination() -> None:
    assert message_op({"op": "decide"}) == "decide"
    assert message_op({"configure": {"settings_version": 1}}) == "configure"
    assert message_op({"describe": True}) == message_op({"op": None, "describe": True}) == "describe"
    assert message_op({"something": 1}) == ""
    assert parse_hook_message({"op": "brand-new"}) is None


def test_decide_model_ignores_unknown_fields_keeps_signals_and_redacts() -> None:
    payload = decide(2, system="secret system prompt", messages=[{"role": "user", "text": "my SSN is 123"}],
                     user={"key_id": "k1", "key_name": "team", "user": "alice"}, region="eu")
    payload["candidates"][0]["tier"] = "primary"
    payload["candidates"][1]["queue_depth"] = 7  # a declared signal
    payload["from_the_future"] = True
    msg = parse_hook_message(payload)
    assert isinstance(msg, DecideMessage)
    assert msg.request.messages[0].text == "my SSN is 123" and msg.request.region == "eu"  # type: ignore[attr-defined]
    assert msg.candidates[0].tier == "primary" and msg.candidates[1].queue_depth == 7  # type: ignore[attr-defined]
    assert msg.candidates[1].tier is None  # absent on the wire, None here
    text = repr(msg)
    assert "SSN" not in text and "secret system prompt" not in text and "alice" not in text
    with pytest.raises(PayloadError, match=r"decide message: candidates.0.idx"):
        parse_hook_message({"op": "decide", "candidates": [{"model": "no idx"}]})


def test_reply_arms_serialize_to_the_wire() -> None:
    assert Abstain().to_wire() == {}
    assert Reject(status=451, message="PII").to_wire() == {"reject": {"status": 451, "message": "PII"}}
    assert Restrict(tags_any=("baa",)).to_wire() == {"restrict": {"tags_any": ["baa"]}}
    assert Order(order=(2, 0)).to_wire() == {"order": [2, 0]}
    assert Rewrite(messages=(BodyMessage(role="user", content="hi"),)).to_wire() == {
        "rewrite": {"messages": [{"role": "user", "content": "hi"}]}}
    assert ConfigureAck(settings_version=3).to_wire() == {"ack": {"settings_version": 3}}
    status = StatusReply(settings_version=2, settings={"a": 1},
                         metrics=(Metric(name="chars_saved_total", type="counter", value=812000),))
    assert status.to_wire() == {"status": {"settings_version": 2, "settings": {"a": 1}, "metrics": [
        {"name": "chars_saved_total", "type": "counter", "value": 812000.0}]}}
    with pytest.raises(ValueError):
        Restrict(tags_any=())
    with pytest.raises(ValueError):
        Metric(name="Bad-Name", type="counter", value=1)


def test_reply_precedence_and_fail_closed_reject() -> None:
    assert parse_hook_reply({"order": [1], "reject": "garbage"}) == Reject()  # malformed reject still rejects
    assert parse_hook_reply({"reject": {"status": 200, "message": ""}}) == Reject(status=403)
    assert isinstance(parse_hook_reply({"rewrite": {"messages": [{"role": "user", "content": "x"}]}, "order": [0]}),
                      Rewrite)
    with pytest.raises(PayloadError, match="malformed reply: Tuple should have at least 1 item"):
        parse_hook_reply({"rewrite": {"messages": []}, "order": [0]})   # the kernel's garbage too
    assert parse_hook_reply({"abstain": True}) == Abstain()


class Gate(HookPlugin):
    settings_schema: ClassVar[dict[str, Any] | None] = {"type": "object", "properties": {"tag": {"type": "string"}}}

    def decide(self, message: DecideMessage) -> Any:
        if message.request.total_chars > 1000:
            return Reject(status=413, message="too long")
        if "tag" in self.settings:
            return Restrict(tags_any=(self.settings["tag"],))
        return None

    def status(self) -> StatusReply | None:
        return StatusReply(settings_version=self.settings_version or 0, settings=self.settings,
                           metrics=(Metric(name="decisions_total", type="counter", value=1),))


def test_hook_base_class_routes_every_op() -> None:
    b = bind_plugin(export_plugin(Gate), name="gate", expected_kind="hook")
    h = b.open({})
    assert b.call(h, decide()) == {}
    assert b.call(h, decide(total_chars=5000)) == {"reject": {"status": 413, "message": "too long"}}
    assert b.call(h, {"configure": {"hook": "g", "settings": {"tag": "baa"}, "settings_version": 4,
                                    "busbar_version": "1.5.0"}}) == {"ack": {"settings_version": 4}}
    assert b.call(h, decide()) == {"restrict": {"tags_any": ["baa"]}}
    assert b.call(h, {"describe": True}) == {"schema": Gate.settings_schema}
    assert b.call(h, {"status": True})["status"]["metrics"][0]["name"] == "decisions_total"
    assert b.call(h, {**decide(), "op": "notify"}) == {}
    assert b.call(h, {"op": "transform"}) == {}


def test_store_base_class_dispatches_operations() -> None:
    class Memory(StorePlugin):
        def __init__(self, settings: dict[str, Any]) -> None:
            super().__init__(settings)
            self.keys: dict[str, Any] = {}

        def put_key(self, key: dict[str, Any]) -> None:
            self.keys[key["id"]] = key

        def get_key(self, id: str) -> Any:
            return self.keys.get(id)

    b = bind_plugin(export_plugin(Memory), name="mem", expected_kind="store")
    h = b.open({})
    assert b.call(h, {"op": "put_key", "args": {"key": {"id": "vk_1"}}}) == {"result": None}
    assert b.call(h, {"op": "get_key", "args": {"id": "vk_1"}}) == {"result": {"id": "vk_1"}}
    assert b.call(h, {"op": "drop_everything"}) == {
        "error": {"kind": "unsupported", "message": "unknown store operation 'drop_everything'"}}
    assert Memory.operations() == frozenset({"put_key", "get_key"})


class Pin(DictHookPlugin):
    """A dict-level gate: the kernel's message as it is, a wire dict back."""

    inline: ClassVar[bool] = True
    settings_schema: ClassVar[dict[str, Any] | None] = {"type": "object"}

    def decide(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        self.settings["last"] = payload                 # the very dict the kernel sent, not a copy
        if payload["request"]["total_chars"] > 1000:
            return {"reject": {"status": 413, "message": "too long"}}
        return {"order": [c["idx"] for c in payload["candidates"][::-1]]} if payload["candidates"] else None


def test_dict_hook_plugin_gets_the_wire_dicts_and_declares_inline() -> None:
    from types import SimpleNamespace

    from busbar.hooks.facade import declares_inline

    b = bind_plugin(export_plugin(Pin), name="pin", expected_kind="hook")
    assert getattr(b.call, "busbar_inline", False) is True
    assert getattr(bind_plugin(export_plugin(Gate), name="gate").call, "busbar_inline", False) is False
    h = b.open({"a": 1})
    msg = decide(2)
    assert b.call(h, msg) == {"order": [1, 0]}
    assert h.settings["last"] is msg
    assert b.call(h, decide(total_chars=5000)) == {"reject": {"status": 413, "message": "too long"}}
    assert b.call(h, decide(0)) == {}                                   # None: abstain
    assert b.call(h, {**msg, "op": "notify"}) == {} and b.call(h, {**msg, "op": "transform"}) == {}
    assert b.call(h, {"op": "future-op"}) == {} and b.call(h, {"future_key": True}) == {}
    assert b.call(h, {"status": True}) == {}                             # before any configure
    assert b.call(h, {"configure": {"hook": "pin", "settings": {"b": 2}, "settings_version": 3,
                                    "busbar_version": "1.5.0"}}) == {"ack": {"settings_version": 3}}
    assert b.call(h, {"status": True}) == {"status": {"settings_version": 3, "settings": {"b": 2}, "metrics": []}}
    assert b.call(h, {"describe": True}) == {"schema": {"type": "object"}}
    assert declares_inline(SimpleNamespace(plugin=SimpleNamespace(binding=b))) is True     # the kernel's check


def test_an_export_subclass_keeps_its_own_busbar_call_and_async_twin() -> None:
    """A plugin that subclasses the export to give ``busbar_call`` an async twin (the first-party
    webrequest hook does) keeps both: the base's per-instance ``busbar_call`` used to shadow it, so the
    kernel found no ``busbar_acall`` and ran the sidecar call on a worker thread."""
    import asyncio

    from busbar_sdk._base import PluginExport, hookimpl

    class Export(PluginExport):
        @hookimpl
        def busbar_call(self, handle: Any, payload: dict[str, Any]) -> dict[str, Any]:
            return {"order": [0]}

    async def twin(handle: Any, payload: dict[str, Any]) -> dict[str, Any]:
        return {"order": [1]}

    Export.busbar_call.busbar_acall = twin  # type: ignore[attr-defined]
    b = bind_plugin(Export(Gate), name="twin", expected_kind="hook")
    h = b.open({})
    assert b.call(h, decide(2)) == {"order": [0]}
    assert getattr(b.call, "busbar_acall", None) is twin
    assert asyncio.run(b.call.busbar_acall(h, decide(2))) == {"order": [1]}  # type: ignore[attr-defined]


def test_export_plugin_refuses_a_non_plugin() -> None:
    with pytest.raises(TypeError, match="takes a subclass of HookPlugin"):
        export_plugin(dict)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ grants

@pytest.mark.parametrize(("needs", "grant", "want"), [
    (("rw", "ro"), ("no", "no"), ("no", "no")),
    (("ro", "ro"), ("rw", "ro"), ("ro", "ro")),
    (("rw", "no"), ("rw", "ro"), ("rw", "no")),
    (("no", "ro"), ("ro", "ro"), ("no", "ro")),
], ids=["operator-narrower", "manifest-narrower", "user-needs-no", "prompt-needs-no"])
def test_effective_grant_is_the_intersection(needs, grant, want) -> None:
    assert tuple(effective_grant(*needs, *grant)) == want


def test_kernel_strips_what_the_grant_does_not_allow(pack, plugdir, keys, load) -> None:
    pack(plugdir / "p.tar.gz", wheel="probe", name="grant-probe", alias="probe",
         extra=["--needs-prompt", "ro", "--needs-user", "ro"])
    plugin = load(make_cfg(keys)).get("probe")
    payload = decide(1, system="sys", messages=[{"role": "user", "text": "hi"}], user={"key_id": "k"})
    assert plugin.open({}).call(payload)["seen"] == []                                   # operator: no/no
    assert plugin.open({}, prompt="rw", user="no").call(payload)["seen"] == ["messages", "system"]  # needs caps rw->ro
    assert plugin.open({}, prompt="ro", user="ro").call(payload)["seen"] == ["messages", "system", "user"]
    assert "system" in payload["request"]  # the caller's payload is never mutated
    with pytest.raises(PluginCallError, match="replied with a rewrite arm but the instance's effective prompt grant "
                                              "is 'ro'; rewrite needs prompt: rw"):
        plugin.open({}, prompt="rw").call({**payload, "op": "transform"})


def test_rewrite_allowed_with_rw_in_both(pack, plugdir, keys, load) -> None:
    pack(plugdir / "p.tar.gz", wheel="probe", name="grant-probe", alias="probe", extra=["--needs-prompt", "rw"])
    inst = load(make_cfg(keys)).get("probe").open({}, prompt="rw")
    assert inst.grant.prompt == "rw"
    assert inst.call({**decide(1), "op": "transform"}) == {"rewrite": {"messages": [{"role": "user", "content": "short"}]}}


# ------------------------------------------------------------------------------------ secrets

def test_secret_references_resolve_through_a_secret_plugin(pack, plugdir, keys, load) -> None:
    pack(plugdir / "s.tar.gz", wheel="secret", name="vault-secret", alias="vault", kind="secret")
    pack(plugdir / "h.tar.gz")
    ps = load(make_cfg(keys))
    resolver = SecretModuleResolver(ps, open_settings={"vault": {"values": {"openai/key": "sk-123"}}})
    try:
        assert resolver("vault", {"path": "openai/key"}) == "sk-123"
        with pytest.raises(SecretResolutionError, match="secret plugin 'vault' could not resolve the reference: "
                                                        "not_found: no secret at missing"):
            resolver("vault", {"path": "missing"})
        with pytest.raises(SecretResolutionError, match="names a kind: hook plugin, not a kind: secret plugin"):
            resolver("hello", {})
        with pytest.raises(SecretResolutionError, match=r"\{ module: nope \} does not name a loaded plugin"):
            resolver("nope", {})
    finally:
        resolver.close()


# ------------------------------------------------------------------------------ sidecar, harness

def _post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_same_hook_class_serves_as_an_http_sidecar() -> None:
    server = start(Gate, settings={"tag": "eu"})
    try:
        in_process = bind_plugin(export_plugin(Gate), name="g")
        expected = in_process.call(in_process.open({"tag": "eu"}), decide())
        assert _post(server.url + "/decide", json.dumps(decide()).encode()) == (200, expected)
        assert _post(server.url, json.dumps({**decide(), "op": "notify"}).encode()) == (200, {})
        assert _post(server.url, json.dumps({"op": "future"}).encode()) == (200, {})
        assert _post(server.url, b"")[0] == 400
        assert _post(server.url, b"[1, 2]")[0] == 400
        assert _post(server.url, json.dumps({"op": "decide", "candidates": [{}]}).encode())[0] == 500
    finally:
        server.close()


def test_conformance_suite_on_a_plain_class() -> None:
    from busbar_sdk.testing import InstanceUnderTest
    b = bind_plugin(export_plugin(Gate), name="g")
    assert_hook_conformance(InstanceUnderTest(b, b.open({})))


def test_pytest_plugin_fixtures(busbar_pack, busbar_load, wheels) -> None:
    tarball = busbar_pack(wheels["plain"], name="plain-hook", alias="plain", kind="hook")
    plugin = busbar_load(tarball)
    assert plugin.open({}).call(decide(2)) == {"order": [0, 1], "v": 1}


def test_harness_refuses_what_the_kernel_refuses(pack, tmp_path, keys) -> None:
    from busbar_sdk import ArtifactError, BindingError, SigningError
    from busbar_sdk.testing import load_packed
    signed = pack(tmp_path / "a.tar.gz")
    with pytest.raises(SigningError, match="the signature does not verify with the given public key"):
        load_packed(signed, public_key=keys["other"][1], workdir=tmp_path / "w")
    with pytest.raises(SigningError, match="is signed; pass its public key"):
        load_packed(signed, public_key=None, workdir=tmp_path / "w")
    needs = pack(tmp_path / "b.tar.gz", wheel="needsdist", name="needs-dist", alias="nd")
    with pytest.raises(ArtifactError, match="requires distribution 'busbar-nonexistent-dependency>=1'"):
        load_packed(needs, public_key=keys["acme"][1], workdir=tmp_path / "w")
    wrong = pack(tmp_path / "c.tar.gz", wheel="wrongkind", name="wrong-kind", alias="wk")
    with pytest.raises(BindingError, match="kind mismatch: the manifest says 'hook' but the plugin reports 'store'"):
        load_packed(wrong, public_key=keys["acme"][1], workdir=tmp_path / "w")
    assert not list((tmp_path / "w").iterdir())  # the failed load left nothing behind
