"""Out-of-process gates end to end: the first-party ``busbar-webrequest-hook`` forwarder (built
from ``plugins/``, signed in the test) in a real busbar, relaying to an HTTP sidecar served by
``busbar_sdk.sidecar`` in this process. A sidecar that answers, answers 500, is slow, is down, or is
killed mid-traffic: each with its exact outcome and headers.

Source: docs/hooks-firstparty.md#busbar-webrequest-hook, docs/hooks.md#what-a-hook-receives (a non-2xx is an error,
never an abstain), docs/hooks.md#fail-safety (kill a hook
mid-traffic and requests keep flowing).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from busbar_sdk import HookPlugin, Order, Reject
from busbar_sdk.artifact import build_wheels
from busbar_sdk.sidecar import start

from tests.e2e.test_hooks_e2e import HEAD, KEY
from tests.plugins.helpers import run_pack
from tests.support.gateway import BIN

REPO = Path(__file__).resolve().parents[2]
STATE: dict[str, Any] = {"mode": "order", "seen": []}


class Router(HookPlugin):
    """The sidecar's logic: ``STATE["mode"]`` picks the answer."""

    def decide(self, message):
        STATE["seen"].append(message)
        mode = STATE["mode"]
        if mode == "crash":
            raise RuntimeError("sidecar bug")                 # the sidecar answers HTTP 500
        if mode == "slow":
            time.sleep(1.0)
        if mode == "reject":
            return Reject(status=451, message="blocked by the sidecar")
        if mode == "abstain":
            return None
        return Order(order=[c.idx for c in reversed(message.candidates)])


@pytest.fixture(scope="module")
def webrequest(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("webrequest")
    (wheel,) = build_wheels([REPO / "plugins" / "busbar-webrequest-hook"], root / "wheels")
    plugdir = root / "plugins"
    plugdir.mkdir()
    status = run_pack(["pack", "--wheel", str(wheel), "--name", "busbar-webrequest-hook", "--alias",
                       "busbar-webrequest", "--kind", "hook", "--version", "1.5.0", "--publisher", "acme",
                       "--needs-prompt", "rw", "--needs-user", "ro", "--settings-schema-file",
                       str(REPO / "plugins" / "busbar-webrequest-hook" / "src" / "busbar_webrequest_hook"
                           / "settings_schema.json"),
                       "--out", str(plugdir / "busbar-webrequest-hook-1.5.0.tar.gz")], KEY[0])
    assert status == 0
    trust = (f'plugins: {{ enabled: true, dir: "{plugdir}", trust: {{ publishers: '
             f'[ {{ name: acme, public_key: "{KEY[1]}" }} ] }} }}\n')
    return plugdir, trust


REVERSE = """
from busbar_sdk import HookPlugin, Order, export_plugin


class Reverse(HookPlugin):
    def decide(self, message):
        return Order(order=[c.idx for c in reversed(message.candidates)])


plugin = export_plugin(Reverse)
"""


def _sidecar_process(tmp: Path, code: str = REVERSE, module: str = "reverse_sidecar") -> Any:
    """A sidecar in its own process (``python -m busbar_sdk.sidecar``) serving ``code`` (a module
    exporting ``plugin``), killable with SIGKILL."""
    import sys

    (tmp / f"{module}.py").write_text(code)
    port = closed_port()
    proc = subprocess.Popen([sys.executable, "-m", "busbar_sdk.sidecar", f"{module}:plugin", "--port",
                             str(port)], cwd=tmp, env={"PYTHONPATH": str(tmp), "PATH": "/usr/bin"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None and "serving" in proc.stdout.readline()
    proc.url = f"http://127.0.0.1:{port}"       # type: ignore[attr-defined]
    return proc


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pool(name: str, url: str, on_error: str, timeout_ms: int = 300) -> str:
    return (f"  {name}:\n    hooks: [ {{ module: busbar-webrequest-hook, timeout_ms: {timeout_ms}, on_error: "
            f"{on_error}, settings: {{ url: \"{url}\", timeout_ms: 2000 }} }} ]\n"
            f"    members: [ {{ model: oa-a }}, {{ model: oa-b }}, {{ model: an-a }} ]\n")


@pytest.fixture(scope="module")
def side(gateway_factory, mock, webrequest, tmp_path_factory):
    _, trust = webrequest
    sidecar = start(Router, host="127.0.0.1", port=0)
    killable = _sidecar_process(tmp_path_factory.mktemp("sidecar"))
    down = f"http://127.0.0.1:{closed_port()}/hook"
    cfg = (HEAD + trust + "pools:\n" + pool("open", sidecar.url + "/rank", "weighted")
           + pool("closed", sidecar.url + "/rank", "reject") + pool("down-open", down, "weighted")
           + pool("down-closed", down, "reject") + pool("kill", killable.url + "/rank", "weighted")
           + "  plain:\n    members: [ { model: oa-a }, { model: oa-b }, { model: an-a } ]\n")
    gw = gateway_factory(cfg, mock.url, env={"BUSBAR_STATE_FILE": ""})
    yield gw, sidecar, killable
    sidecar.close()
    if killable.poll() is None:
        killable.kill()
        killable.wait(5)
    killable.stdout.close()


@pytest.fixture(autouse=True)
def _mode():
    STATE["mode"], STATE["seen"] = "order", []
    yield


def chat(gw: Any, pool_name: str) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                      json={"model": pool_name, "messages": [{"role": "user", "content": "hi"}]})


def test_sidecar_order_reaches_the_walk(side):
    gw, _, _ = side
    r = chat(gw, "open")
    assert (r.status_code, r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == \
        (200, "an-a", "busbar-webrequest-hook")
    (msg,) = STATE["seen"]
    assert msg.request.pool == "open" and [c.idx for c in msg.candidates] == [0, 1, 2]
    assert msg.request.messages is None                      # no prompt grant: shape only


def test_sidecar_reject_is_dialect_native(side):
    gw, _, _ = side
    STATE["mode"] = "reject"
    r = chat(gw, "open")
    assert (r.status_code, r.json()["error"]["message"]) == (451, "blocked by the sidecar")
    r = httpx.post(gw.url + "/v1/messages", timeout=30, json={"model": "open", "max_tokens": 10,
                                                             "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 451 and r.json()["type"] == "error"


def test_sidecar_abstain(side):
    gw, _, _ = side
    STATE["mode"] = "abstain"
    r = chat(gw, "open")
    assert r.status_code == 200 and r.headers["x-busbar-route-policy"] == "weighted"


@pytest.mark.parametrize("pool_name,status,policy,error", [
    ("open", 200, "weighted", None), ("closed", 503, "busbar-webrequest-hook", "error")])
def test_sidecar_answering_500(side, pool_name, status, policy, error):
    gw, _, _ = side
    STATE["mode"] = "crash"
    r = chat(gw, pool_name)
    assert (r.status_code, r.headers["x-busbar-route-policy"], r.headers.get("x-busbar-hook-error")) == \
        (status, policy, error)
    if status == 503:
        assert r.json()["error"]["message"] == ("hook 'busbar-webrequest-hook' raised an error and its on_error is "
                                                "reject; the request was not routed")


@pytest.mark.parametrize("pool_name,status,error", [("open", 200, None), ("closed", 503, "timeout")])
def test_sidecar_slower_than_the_gate_deadline(side, pool_name, status, error):
    gw, _, _ = side
    STATE["mode"] = "slow"
    t = time.monotonic()
    r = chat(gw, pool_name)
    assert r.status_code == status and r.headers.get("x-busbar-hook-error") == error
    assert time.monotonic() - t < 0.3 + 0.5                 # cut at timeout_ms 300, not the sidecar's 1 s


@pytest.mark.parametrize("pool_name,status", [("down-open", 200), ("down-closed", 503)])
def test_sidecar_that_is_down(side, pool_name, status):
    gw, _, _ = side
    r = chat(gw, pool_name)
    assert r.status_code == status
    if status == 503:
        assert r.headers["x-busbar-hook-error"] == "error"


def test_killing_the_sidecar_mid_traffic_keeps_requests_flowing(side):
    gw, _, killable = side
    results: list[tuple[int, str]] = []

    def traffic():
        for _ in range(40):
            r = chat(gw, "kill")
            results.append((r.status_code, r.headers["x-busbar-route-policy"]))
    t = threading.Thread(target=traffic)
    t.start()
    while len(results) < 10:
        time.sleep(0.01)
    killable.kill()                                          # SIGKILL: connections die with it
    t.join(60)
    assert [s for s, _ in results] == [200] * 40
    policies = [p for _, p in results]
    assert policies[0] == "busbar-webrequest-hook" and policies[-1] == "weighted"


ECHO_HEADERS = """
import json

from busbar_sdk import DictHookPlugin, export_plugin

SECRETS = ("sk-client-secret", "sess=42", "xk-9")


class EchoHeaders(DictHookPlugin):
    def decide(self, payload):
        seen = json.dumps(payload)
        return {"reject": {"status": 451, "message": json.dumps(
            {"headers": payload["request"].get("headers"), "credential": any(s in seen for s in SECRETS)})}}


plugin = export_plugin(EchoHeaders)
"""


@pytest.fixture(scope="module")
def echo(gateway_factory, mock, webrequest, tmp_path_factory):
    """A sidecar process that answers with what it received: ``request.headers`` and whether any
    credential value is anywhere in the message (a 451 whose message is that JSON)."""
    _, trust = webrequest
    proc = _sidecar_process(tmp_path_factory.mktemp("echo"), ECHO_HEADERS, "echo_headers")

    def hook(name: str, extra: str) -> str:
        return (f"  {name}:\n    hooks: [ {{ module: busbar-webrequest-hook, timeout_ms: 2000, settings: {{ url: "
                f"\"{proc.url}/hook\"{extra} }} }} ]\n    members: [ {{ model: oa-a }} ]\n")
    try:
        yield gateway_factory(HEAD + trust + "pools:\n"
                              + hook("with-headers", ", request_headers: [X-Tenant, x-trace-id, X-Absent]")
                              + hook("without-headers", ""), mock.url, env={"BUSBAR_STATE_FILE": ""})
    finally:
        proc.kill()
        proc.wait(5)
        proc.stdout.close()


SENT = {"X-Tenant": "acme", "X-Trace-Id": "t-1", "X-Other": "no", "Authorization": "Bearer sk-client-secret",
        "Cookie": "sess=42", "x-api-key": "xk-9"}


@pytest.mark.parametrize(("pool_name", "received"), [
    ("with-headers", {"x-tenant": "acme", "x-trace-id": "t-1"}), ("without-headers", None)])
def test_the_sidecar_receives_exactly_the_allowlisted_headers(echo, pool_name, received):
    r = httpx.post(echo.url + "/v1/chat/completions", timeout=30, headers=SENT,
                   json={"model": pool_name, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 451
    assert json.loads(r.json()["error"]["message"]) == {"headers": received, "credential": False}


def test_a_credential_in_request_headers_refuses_the_boot(tmp_path, webrequest):
    _, trust = webrequest
    cfg = (HEAD.replace("MOCK", "http://127.0.0.1:9").replace("{port}", "9") + trust
           + "pools:\n  p:\n    hooks: [ { module: busbar-webrequest-hook, settings: { url: "
             "\"http://127.0.0.1:9/hook\", request_headers: [X-Tenant, Authorization] } } ]\n"
             "    members: [ { model: oa-a } ]\n")
    (tmp_path / "config.yaml").write_text(cfg)
    run = subprocess.run([str(BIN / "busbar"), "--config", str(tmp_path / "config.yaml"), "--validate"],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "T_OPENAI_KEY": "k", "T_ANTHROPIC_KEY": "k"})
    assert (run.returncode, run.stderr.splitlines()) == (2, [
        "config.yaml: pools.p.hooks[0].settings.request_headers[1]: 'Authorization' carries a credential; "
        "credentials are never projected to a hook (authorization, proxy-authorization, x-api-key, x-goog-api-key, "
        "api-key, cookie, set-cookie, x-amz-*): remove it", "busbar: 1 config error(s); refusing to start"])
