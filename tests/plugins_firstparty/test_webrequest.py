"""busbar-webrequest-hook, loaded from its signed tarball, against real loopback HTTP sidecars.

Source: docs/hooks-firstparty.md#busbar-webrequest-hook, docs/hooks.md#management-messages; C032
(SSRF at config and at connect time), C035 (a slow hook is bounded).
"""
from __future__ import annotations

import gzip
import json
import threading
import time
from typing import Any

import pytest
from busbar_sdk import HookPlugin, Order, sidecar

from tests.plugins_firstparty.conftest import plugin_module
from tests.plugins_firstparty.support import Script, Stub, per_request, prompt_request, request


@pytest.fixture
def stub():
    server = Stub()
    yield server
    server.close()


@pytest.fixture
def webrequest(load_plugin):
    return load_plugin("webrequest")


class Reverse(HookPlugin):
    def decide(self, message):
        return Order(order=[c.idx for c in reversed(message.candidates)])


@pytest.fixture
def reverse_sidecar():
    server = sidecar.start(Reverse)
    yield server
    server.close()


DECIDE = per_request("decide", request(has_tools=True, max_tokens=8192, stream=True, future_signal="x"),
                     [{"idx": 0, "model": "claude-opus", "tier": "large", "cost_per_mtok": 15.0, "latency_ms": 320.5,
                       "available_concurrency": 14, "rate_headroom": 0.82},
                      {"idx": 1, "model": "claude-sonnet", "tier": "small", "cost_per_mtok": 3.0,
                       "available_concurrency": 18, "budget_remaining": 5000, "tags": ["sonnet"]}],
                     {"budget_remaining": 120000, "budget": [{"bucket_id": "group:eng@month",
                                                              "spend_micros_at_current_rate": 10,
                                                              "remaining_micros": 99, "window_start": 0,
                                                              "budget_period": "month"}]},
                     a_future_member={"x": 1})


def test_manifest_declares_its_identity_and_requirements(webrequest) -> None:
    m = webrequest.manifest
    assert (m.name, m.alias, m.kind, m.version, m.publisher) == (
        "busbar-webrequest-hook", "busbar-webrequest", "hook", "1.5.0", "busbar")
    required = {r.split(">")[0].split("=")[0] for r in m.requires_dist}
    assert {"busbar-sdk", "httpx", "httpcore", "aiohttp", "orjson"} <= required
    assert "idna" not in required                 # host canonicalization is the sdk's (busbar_sdk.ssrf)


def test_conformance_against_a_real_sidecar(webrequest, reverse_sidecar) -> None:
    """The sdk's conformance rules; its configure pushes ``{}``, which a forwarder must refuse (no
    url), so that one step is checked with a complete settings map."""
    inst = webrequest.open({"url": reverse_sidecar.url + "/hook"})
    try:
        assert inst.call(DECIDE) == {"order": [1, 0]}
        assert inst.call({"op": "no-such-op-yet", "request": {}}) == {}
        assert inst.call({"no_such_management_key": True}) == {}
        assert inst.call(per_request("notify", request())) == {}
        with pytest.raises(Exception, match=r"settings.url is required"):
            inst.configure({}, settings_version=7)
        settings = {"url": reverse_sidecar.url + "/hook"}
        assert inst.configure(settings, settings_version=7) == {"ack": {"settings_version": 7}}
        assert set(inst.call({"describe": True})) == {"schema"}
        assert inst.call({"status": True})["status"]["settings_version"] == 7
        assert inst.call(per_request("decide", request(a_field_from_the_future=1),
                                     [{"idx": 0}, {"idx": 1}], future_member={"x": 1})) == {"order": [1, 0]}
    finally:
        inst.close()


def test_decide_and_transform_are_relayed_byte_for_byte_and_answered_verbatim(webrequest, stub) -> None:
    stub.script = Script(body=b'{"order":[1,0],"report":{"why":"x"},"extra":true}')
    inst = webrequest.open({"url": stub.url, "headers": {"Authorization": "Bearer s3cret"}})
    try:
        assert inst.call(DECIDE) == {"order": [1, 0], "report": {"why": "x"}, "extra": True}
        transform = per_request("transform", prompt_request([("user", "hi")]))
        stub.script = Script(body=b'{"rewrite":{"messages":[{"role":"user","content":"hi"}]}}')
        assert inst.call(transform) == {"rewrite": {"messages": [{"role": "user", "content": "hi"}]}}
    finally:
        inst.close()
    first, second = stub.seen
    assert first.body == json.dumps(DECIDE, separators=(",", ":")).encode()
    assert json.loads(second.body) == transform
    assert first.path == "/hook" and first.headers["content-type"] == "application/json"
    assert first.headers["authorization"] == "Bearer s3cret"
    assert first.headers["accept-encoding"] == "identity"


def test_notify_is_relayed_and_never_answered(webrequest, stub) -> None:
    stub.script = Script(body=b'{"order":[0]}')
    inst = webrequest.open({"url": stub.url})
    payload = per_request("notify", request(), stage={"at": "completion", "outcome": "ok", "status": 200})
    assert inst.call(payload) == {}
    assert stub.bodies() == [payload]
    inst.close()


def test_unknown_ops_and_keys_are_not_for_the_sidecar(webrequest, stub) -> None:
    inst = webrequest.open({"url": stub.url})
    assert inst.call({"op": "from_the_future", "request": {}}) == {}
    assert inst.call({"unknown_management": True}) == {}
    assert stub.seen == []
    inst.close()


def test_keep_alive_pool_reuses_one_connection(webrequest, stub) -> None:
    stub.script = Script(body=b'{}')
    inst = webrequest.open({"url": stub.url})
    for _ in range(5):
        assert inst.call(DECIDE) == {}
    inst.close()
    assert len({s.client_port for s in stub.seen}) == 1


@pytest.mark.parametrize(("script", "reason"), [
    (Script(status=204, body=b""), "empty body"),  # "abstain via 204" is an error, not an abstain
    (Script(status=500, body=b'{"order":[0]}'), "HTTP 500"),
    (Script(status=403, body=b'{"reject":{"status":403}}'), "HTTP 403"),
    (Script(status=302, body=b"", headers={"Location": "http://169.254.169.254/latest/"}), "HTTP 302"),
    (Script(body=b""), "empty body"),
    (Script(body=b"   \n"), "empty body"),
    (Script(body=b"not json"), "not JSON"),
    (Script(body=b'{"order": NaN}'), "not JSON"),
    (Script(body=b"[1, 2]"), "JSON array, not an object"),
    (Script(body=b"null"), "JSON null, not an object"),
    (Script(body=b"\xff\xfe{}"), "not JSON"),
    (Script(body=b'{"a":' * 65 + b"1" + b"}" * 65), "nests 65 levels deep; the limit is 64"),
    (Script(body=b'{"pad":"' + b"x" * 70000 + b'"}'), "the limit is 65536"),
    (Script(body=b'{"pad":"' + b"x" * 70000 + b'"}', send_length=False), "exceeds 65536 bytes"),
    (Script(body=gzip.compress(b"{}"), headers={"Content-Encoding": "gzip"}), "gzip-encoded"),
])
def test_a_bad_reply_is_an_error_never_an_abstain(webrequest, stub, script, reason) -> None:
    stub.script = script
    inst = webrequest.open({"url": stub.url})
    with pytest.raises(Exception, match=reason) as info:
        inst.call(DECIDE)
    assert type(info.value).__name__ in ("WebRequestError", "PayloadError")
    inst.close()
    if script.status == 302:
        assert len(stub.seen) == 1  # the redirect was not followed


def test_depth_guard_and_cap_are_settings(webrequest, stub) -> None:
    deep = b'{"a":' * 100 + b"1" + b"}" * 100
    stub.script = Script(body=deep)
    inst = webrequest.open({"url": stub.url, "max_reply_depth": 128})
    assert inst.call(DECIDE)["a"]["a"]
    inst.close()
    # brackets inside strings do not count
    stub.script = Script(body=b'{"s":"' + b"[{" * 500 + b'"}')
    inst = webrequest.open({"url": stub.url})
    assert inst.call(DECIDE) == {"s": "[{" * 500}
    inst.close()


def test_a_slow_sidecar_is_cut_off_and_concurrency_stays_bounded(webrequest, stub) -> None:
    """C035: the forwarder never waits longer than timeout_ms, and its pool bounds the sidecar's load."""
    stub.script = Script(body=b"{}", delay_s=1.5)
    inst = webrequest.open({"url": stub.url, "timeout_ms": 200, "max_connections": 4,
                            "max_keepalive_connections": 4})
    errors: list[str] = []
    durations: list[float] = []

    def one() -> None:
        started = time.monotonic()
        try:
            inst.call(DECIDE)
        except Exception as e:  # noqa: BLE001
            errors.append(type(e).__name__ + ": " + str(e))
        durations.append(time.monotonic() - started)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(errors) == 20 and all("within 200 ms" in e for e in errors), errors[:3]
    assert max(durations) < 1.0
    # At most max_connections are open at once; a call that cannot get one within timeout_ms gives
    # up without reaching the sidecar (the sidecar's abandoned handlers may still be sleeping).
    assert len(stub.seen) < 20 and stub.max_concurrent <= 2 * 4
    status = inst.call({"status": True})["status"]
    errs = {(m["labels"]["op"], m["labels"]["reason"]): m["value"] for m in status["metrics"]
            if m["name"] == "webrequest_errors_total"}
    assert errs[("decide", "timeout")] == 20
    inst.close()


def test_a_dead_sidecar_is_a_connect_error(webrequest) -> None:
    dead = Stub()
    url = dead.url
    dead.close()
    inst = webrequest.open({"url": url, "timeout_ms": 500})
    with pytest.raises(Exception, match="cannot connect"):
        inst.call(DECIDE)
    inst.close()


# ------------------------------------------------------------------------------ settings and SSRF

@pytest.mark.parametrize(("settings", "message"), [
    ({}, "settings.url is required"),
    ({"url": "https://10.0.0.5/hook"}, "private"),
    ({"url": "http://192.168.1.2/"}, "private"),
    ({"url": "https://100.64.0.1/"}, "carrier-grade NAT"),
    ({"url": "http://169.254.169.254/latest/"}, "cloud-metadata"),
    ({"url": "https://metadata.google.internal/"}, "cloud-metadata"),
    ({"url": "https://0xA9FEA9FE/"}, "cloud-metadata"),
    ({"url": "https://[::ffff:10.0.0.1]/"}, "private"),
    ({"url": "https://[fe80::1]/"}, "link-local"),
    ({"url": "http://sidecar.example.com/hook"}, "remote endpoints must use https"),
    ({"url": "ftp://127.0.0.1/"}, "unsupported URL scheme"),
    ({"url": "http://127.0.0.1/", "timeout_ms": 0}, "settings.timeout_ms"),
    ({"url": "http://127.0.0.1/", "timeout_ms": True}, "settings.timeout_ms"),
    ({"url": "http://127.0.0.1/", "max_reply_bytes": 10}, "settings.max_reply_bytes"),
    ({"url": "http://127.0.0.1/", "headers": {"Host": "x"}}, "set by the forwarder itself"),
    ({"url": "http://127.0.0.1/", "headers": {"X-A": "a\r\nb"}}, "single-line"),
    ({"url": "http://127.0.0.1/", "allow_hosts": ["not a host!"]}, "settings.allow_hosts"),
    ({"url": "http://127.0.0.1/", "request_headers": ["X-Tenant", "Cookie"]},
     r"settings\.request_headers\[1\]: 'Cookie' carries a credential"),
    ({"url": "http://127.0.0.1/", "request_headers": "X-Tenant"},
     r"settings\.request_headers: must be a list of request header names, found str"),
    ({"url": "http://127.0.0.1/", "max_connections": 2, "max_keepalive_connections": 3}, "must not exceed"),
])
def test_bad_settings_fail_the_open(webrequest, settings, message) -> None:
    with pytest.raises(Exception, match=message):
        webrequest.open(settings)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://[::1]:9/", "http://localhost:9/",
                                 "http://sidecar.localhost:9/", "https://hooks.example.com/rtr",
                                 "https://user:pw@hooks.example.com/"])
def test_allowed_urls_open_without_touching_the_network(webrequest, url) -> None:
    webrequest.open({"url": url}).close()


def _resolver(mapping: dict[str, list[str]]):
    def resolve(host: str, port: int) -> list[str]:
        return mapping[host]
    return resolve


def test_connect_time_resolution_refuses_private_answers(webrequest, stub, monkeypatch) -> None:
    """C032 (c): a name that answers a private address is refused after DNS, before any connection."""
    ssrf = plugin_module("busbar_webrequest_hook._connect")
    monkeypatch.setattr(ssrf, "RESOLVER", _resolver({
        "sidecar.example.com": ["10.0.0.5"], "mixed.example.com": ["93.184.216.34", "169.254.169.254"],
        "rebind.example.com": ["127.0.0.1"], "evil.localhost": ["8.8.8.8"]}))
    cases = {"https://sidecar.example.com/h": "resolved to 10.0.0.5",
             "https://mixed.example.com/h": "cloud-metadata address",
             "https://rebind.example.com/h": "DNS rebinding guard",
             f"http://evil.localhost:{stub.port}/h": "a localhost name must resolve to loopback only"}
    for url, reason in cases.items():
        inst = webrequest.open({"url": url, "timeout_ms": 1000})
        with pytest.raises(Exception, match=reason) as info:
            inst.call(DECIDE)
        assert getattr(info.value, "reason", None) == "ssrf"
        inst.close()
    assert stub.seen == []


def test_localhost_names_and_the_allow_list_reach_the_sidecar(webrequest, stub, monkeypatch) -> None:
    ssrf = plugin_module("busbar_webrequest_hook._connect")
    monkeypatch.setattr(ssrf, "RESOLVER", _resolver({"router.localhost": ["127.0.0.1"],
                                                     "sidecar.internal": ["127.0.0.1"]}))
    inst = webrequest.open({"url": f"http://router.localhost:{stub.port}/a"})
    assert inst.call(DECIDE) == {}
    inst.close()
    with pytest.raises(Exception, match="remote endpoints must use https"):
        webrequest.open({"url": f"http://sidecar.internal:{stub.port}/b"})
    inst = webrequest.open({"url": f"http://sidecar.internal:{stub.port}/b", "allow_hosts": ["sidecar.internal"]})
    assert inst.call(DECIDE) == {}
    inst.close()
    assert [s.path for s in stub.seen] == ["/a", "/b"]


def test_the_deployments_security_policy_reaches_the_forwarders_guard(webrequest, stub) -> None:
    """security.allow_metadata_hosts / blocked_metadata_hosts apply to the forwarder's egress as to
    the kernel's (the kernel sets the policy before plugins open; busbar_sdk.ssrf.set_deployment_policy)."""
    from busbar_sdk.ssrf import SsrfPolicy, deployment_policy, set_deployment_policy

    before = deployment_policy()
    try:
        with pytest.raises(Exception, match="cloud-metadata endpoint"):
            webrequest.open({"url": "https://169.254.169.254/hook"})
        set_deployment_policy(SsrfPolicy(allow_metadata_hosts=["169.254.169.254"]))
        webrequest.open({"url": "https://169.254.169.254/hook"}).close()       # open does not connect
        set_deployment_policy(SsrfPolicy(blocked_metadata_hosts=["127.0.0.1"]))
        inst = webrequest.open({"url": f"http://localhost:{stub.port}/h", "timeout_ms": 1000})
        with pytest.raises(Exception, match="cloud-metadata") as info:
            inst.call(DECIDE)
        assert getattr(info.value, "reason", None) == "ssrf"
        inst.close()
    finally:
        set_deployment_policy(before)
    assert stub.seen == []


# ------------------------------------------------------------------------------ management

def test_configure_is_relayed_and_committed_only_on_the_sidecars_exact_ack(webrequest, stub) -> None:
    def ack(body: bytes) -> bytes:
        msg = json.loads(body)
        if "configure" in msg:
            return json.dumps({"ack": {"settings_version": msg["configure"]["settings_version"]}}).encode()
        return b'{"order":[0]}'

    stub.script = Script(body=ack)
    inst = webrequest.open({"url": stub.url})
    settings = {"url": stub.url.replace("/hook", "/v2"), "headers": {"Authorization": "Bearer k"},
                "threshold": 3}
    assert inst.configure(settings, settings_version=4, hook="router") == {"ack": {"settings_version": 4}}
    relayed = stub.bodies()[0]["configure"]
    assert relayed == {"hook": "router", "settings": {"url": settings["url"], "threshold": 3},
                       "settings_version": 4, "busbar_version": "1.5.0"}
    assert stub.seen[0].path == "/v2" and stub.seen[0].headers["authorization"] == "Bearer k"
    assert inst.call(DECIDE) == {"order": [0]}
    assert stub.seen[-1].path == "/v2"  # the committed URL is used at once

    stub.script = Script(body=b'{"ack":{"settings_version":4}}')  # a stale ack is no ack
    with pytest.raises(Exception, match="did not acknowledge settings_version 5"):
        inst.configure({"url": stub.url.replace("/hook", "/v3")}, settings_version=5)
    with pytest.raises(Exception, match="private"):
        inst.configure({"url": "https://10.1.2.3/"}, settings_version=6)
    stub.script = Script(body=b'{"order":[1]}')
    assert inst.call(DECIDE) == {"order": [1]}
    assert stub.seen[-1].path == "/v2"  # nothing committed by the refused pushes
    status = inst.call({"status": True})["status"]
    assert status["settings_version"] == 4
    inst.close()


def test_describe_merges_the_sidecars_schema(webrequest, stub) -> None:
    stub.script = Script(body=json.dumps({"schema": {"type": "object", "required": ["threshold"], "properties": {
        "threshold": {"type": "integer"}, "url": {"type": "integer"}}}}).encode())
    inst = webrequest.open({"url": stub.url})
    schema = inst.call({"describe": True})["schema"]
    assert schema["properties"]["threshold"] == {"type": "integer"}
    assert schema["properties"]["url"]["type"] == "string"  # the forwarder's own keys win
    assert schema["required"] == ["url", "threshold"]
    stub.script = Script(status=500)
    assert "threshold" not in inst.call({"describe": True})["schema"]["properties"]
    inst.close()


def test_status_relays_the_sidecar_and_appends_forwarder_metrics(webrequest, stub) -> None:
    stub.script = Script(body=json.dumps({"status": {"settings_version": 9, "settings": {"k": 1}, "metrics": [
        {"name": "decisions_total", "type": "counter", "value": 3}]}}).encode())
    inst = webrequest.open({"url": "http://user:pw@" + stub.url.removeprefix("http://"),
                            "headers": {"Authorization": "Bearer s3cret"}})
    status = inst.call({"status": True})["status"]
    assert status["settings_version"] == 9 and status["settings"] == {"k": 1}
    names = [m["name"] for m in status["metrics"]]
    assert names[0] == "decisions_total" and "webrequest_messages_total" in names and len(names) <= 64
    stub.script = Script(body=b"{}")  # a sidecar without status: the forwarder's own
    own = inst.call({"status": True})["status"]
    assert own["settings_version"] == 0
    assert own["settings"]["headers"] == {"Authorization": "***"}
    assert "pw" not in own["settings"]["url"] and "s3cret" not in json.dumps(own)
    inst.close()


def test_errors_never_echo_url_credentials(webrequest, stub) -> None:
    stub.script = Script(status=500)
    inst = webrequest.open({"url": "http://user:topsecret@" + stub.url.removeprefix("http://")})
    with pytest.raises(Exception) as info:
        inst.call(DECIDE)
    assert "topsecret" not in str(info.value) and "***@" in str(info.value)
    inst.close()


def _payload_sizes() -> list[dict[str, Any]]:
    big = "word " * 20000
    return [per_request("transform", prompt_request([("user", big), ("assistant", "ok"), ("user", "go")]))]


def test_large_payloads_round_trip(webrequest, reverse_sidecar) -> None:
    inst = webrequest.open({"url": reverse_sidecar.url, "max_reply_bytes": 1 << 20})
    for payload in _payload_sizes():
        assert inst.call(payload) == {}
    inst.close()
