"""The admin listener as a process: its own /healthz, the admin credential (401), unknown routes,
the boot rules of admin_listen / admin_insecure / auth.admin_auth, the config routes and the served
OpenAPI document (docs/admin.md)."""
from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.admin.conftest import BASE, PREFIX, PROVIDER_SECRET, AdminGateway
from tests.support.certs import make_ca
from tests.support.gateway import free_port

BUSBAR = str(Path(sys.executable).parent / "busbar")
ROOT = Path(__file__).resolve().parents[2]
UNAUTHORIZED = {"error": {"code": "unauthorized", "message": "a valid admin credential is required "
                                                             "(Authorization: Bearer <token> or x-admin-token)"}}


def test_healthz_is_open_and_everything_else_needs_the_token(gw: AdminGateway) -> None:
    r = httpx.get(gw.admin + "/healthz")
    assert (r.status_code, r.text) == (200, "ok")
    for headers in ({}, {"authorization": "Bearer wrong"}, {"x-admin-token": "wrong"}, {"authorization": "Bearer"},
                    {"authorization": f"Basic {gw.token}"}):
        r = httpx.get(gw.admin + PREFIX + "/keys", headers=headers)
        assert (r.status_code, r.json(), r.headers["www-authenticate"]) == (401, UNAUTHORIZED, "Bearer")
    r = httpx.get(gw.admin + PREFIX + "/keys", headers={"x-admin-token": gw.token})  # type: ignore[dict-item]
    assert r.status_code == 200


def test_a_minted_data_plane_key_is_not_an_admin_credential(gw: AdminGateway) -> None:
    token = gw.client.post("/keys", json={"name": "dp"}).json()["token"]
    r = httpx.post(gw.admin + PREFIX + "/keys", json={"name": "x"}, headers={"authorization": f"Bearer {token}"})
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)


def test_unknown_routes(gw: AdminGateway) -> None:
    assert httpx.get(gw.admin + PREFIX + "/nothing").json() == UNAUTHORIZED
    r = gw.client.get("/nothing")
    assert (r.status_code, r.json()) == (404, {"error": {"code": "not_found",
                                                         "message": "no admin route /api/v1/admin/nothing"}})
    r = gw.client.put("/keys")
    assert (r.status_code, r.json()) == (405, {"error": {"code": "method_not_allowed",
                                                         "message": "PUT is not allowed on /api/v1/admin/keys"}})


def test_config_version_and_validate(gw: AdminGateway) -> None:
    cfg = gw.client.get("/config")
    assert cfg.status_code == 200
    body = cfg.json()
    assert (body["version"], len(body["sha256"]), cfg.headers["etag"]) == (1, 64, f'"{body["sha256"][:16]}"')
    good = gw.client.post("/config/validate", json={"config": "providers:\n  openai: { api_key: { env: T_PROVIDER_KEY } }"
                                                              "\nmodels:\n  gpt: { provider: openai }\n"})
    assert good.json() == {"valid": True, "errors": [], "warnings": [
        "config.yaml: auth.chain: [] is an open front door: no client authentication (development only)"]}
    bad = gw.client.post("/config/validate", json={"config": "providers:\n  openai: { api_key: { env: T_PROVIDER_KEY } }"
                                                             "\nmodels:\n  gpt: { provider: nope }\n"})
    assert bad.status_code == 200
    assert bad.json() == {"valid": False, "warnings": [], "errors": [
        "config.yaml: models.gpt.provider: 'nope' is not defined under providers; fix the name or add the provider"]}


def test_validate_never_echoes_an_environment_value(gw: AdminGateway) -> None:
    text = ("listen: \"${T_PROVIDER_KEY}\"\nproviders:\n  openai: { api_key: { env: T_PROVIDER_KEY }, protocol: "
            "\"${T_PROVIDER_KEY}\" }\nmodels:\n  gpt: { provider: openai, max_concurrent: \"${T_PROVIDER_KEY}\" }\n")
    r = gw.client.post("/config/validate", json={"config": text})
    assert PROVIDER_SECRET not in r.text
    assert r.json()["errors"] == [
        "config.yaml: models.gpt.max_concurrent: must be a whole number, found '${T_PROVIDER_KEY}'"]
    other = gw.client.post("/config/validate", json={"config": text.replace("max_concurrent: \"${T_PROVIDER_KEY}\"",
                                                                            "max_concurrent: 2")})
    assert PROVIDER_SECRET not in other.text
    assert "unknown protocol '${T_PROVIDER_KEY}'" in other.text


def test_the_served_openapi_document_is_the_committed_one(gw: AdminGateway) -> None:
    served = gw.client.get("/openapi.json").json()
    committed = json.loads((ROOT / "docs" / "admin-openapi.json").read_text())
    assert served == committed
    assert served["openapi"] == "3.1.0"
    ops = served["paths"]
    assert ops["/api/v1/admin/keys"]["post"]["x-busbar-required-scope"] == "mint"
    assert ops["/api/v1/admin/keys"]["get"]["x-busbar-required-scope"] == "read-only"
    assert ops["/api/v1/admin/keys/{key_id}"]["delete"]["x-busbar-required-scope"] == "full"
    assert ops["/api/v1/admin/hooks/{name}/settings"]["patch"]["x-busbar-required-scope"] == "hooks-register"


def test_open_admin_auth_serves_without_a_credential(admin_gateway: Callable[..., AdminGateway]) -> None:
    g = admin_gateway(base=BASE.replace("    - admin-tokens: {{ token: {{ env: T_ADMIN_TOKEN }} }}\n", "")
                      .replace("  admin_auth:\n", "  admin_auth: []\n"), token=None)
    r = httpx.post(g.admin + PREFIX + "/keys", json={"name": "open"})
    assert r.status_code == 201
    assert "auth.admin_auth: [] is an OPEN admin API" in g.logs()
    audit = httpx.get(g.admin + PREFIX + "/audit").json()["items"]
    assert [(a["action"], a["principal"]) for a in audit] == [("boot", "system"), ("key.mint", "anonymous")]


OPEN_HOST = {"error": {"code": "forbidden", "message": (
    "the admin API is open (auth.admin_auth: []) and answers only requests whose Host is localhost, a loopback "
    "address or the admin_listen host; this Host was refused (DNS rebinding guard)")}}
OPEN_ORIGIN = {"error": {"code": "forbidden", "message": (
    "the admin API is open (auth.admin_auth: []) and refuses cross-site browser requests; this request's Origin is "
    "not the admin listener's own")}}


def test_open_admin_refuses_a_rebound_host_and_cross_site_origins(admin_gateway: Callable[..., AdminGateway]) -> None:
    """Open mode has no credential, so the Host and Origin checks are what keeps a hostile web page out
    (DNS rebinding: its own name in Host; a cross-site form or fetch: its Origin / Sec-Fetch-Site)."""
    g = admin_gateway(base=BASE.replace("    - admin-tokens: {{ token: {{ env: T_ADMIN_TOKEN }} }}\n", "")
                      .replace("  admin_auth:\n", "  admin_auth: []\n"), token=None)
    port = g.admin_port
    apply_url = g.admin + PREFIX + "/config/apply"
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", f"10.0.0.5:{port}",
                 "localhost.:x", "user@localhost"):
        r = httpx.post(apply_url, headers={"host": host}, content=b"{}")
        assert (r.status_code, r.json(), r.headers["connection"]) == (403, OPEN_HOST, "close"), host
    for origin in ("http://evil.example", f"http://localhost:{port + 1}", "null", f"http://localhost:{port}",
                   f"ftp://127.0.0.1:{port}"):
        r = httpx.post(apply_url, headers={"origin": origin})
        assert (r.status_code, r.json()) == (403, OPEN_ORIGIN), origin
    r = httpx.get(g.admin + PREFIX + "/info", headers={"sec-fetch-site": "cross-site"})
    assert (r.status_code, r.json()) == (403, OPEN_ORIGIN)
    assert httpx.get(g.admin + "/healthz", headers={"host": "evil.example"}).status_code == 200
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}", "127.1.2.3"):
        r = httpx.get(g.admin + PREFIX + "/info", headers={"host": host})
        assert (r.status_code, r.json()["admin_api_version"]) == (200, "1.0.0"), host
    for origin in (f"http://127.0.0.1:{port}", f"HTTPS://127.0.0.1:{port}"):     # this listener, either scheme
        r = httpx.get(g.admin + PREFIX + "/info", headers={"origin": origin, "sec-fetch-site": "same-origin"})
        assert r.status_code == 200, origin


def test_a_token_protected_admin_api_does_not_check_host(admin_gateway: Callable[..., AdminGateway]) -> None:
    g = admin_gateway()
    r = httpx.get(g.admin + PREFIX + "/info", headers={"host": "admin.example", "authorization": f"Bearer {g.token}"})
    assert r.status_code == 200


def test_no_token_configured_means_no_listener(admin_gateway: Callable[..., AdminGateway]) -> None:
    g = admin_gateway(base=BASE.replace("    - admin-tokens: {{ token: {{ env: T_ADMIN_TOKEN }} }}\n",
                                        "    - admin-tokens\n"), token=None, env={"BUSBAR_LOG": "info"})
    with pytest.raises(httpx.ConnectError):
        httpx.get(g.admin + "/healthz")
    assert "admin API off: auth.admin_auth has admin-tokens without a token:" in g.logs()


def _boot(tmp_path: Path, text: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    return subprocess.run([BUSBAR, "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "T_PROVIDER_KEY": "sk", **env})


def _config(admin_listen: str, extra: str = "") -> str:
    port = free_port()
    return (BASE.replace("{port}", "{{port}}").format(admin_port=0).replace("{port}", str(port))
            .replace('admin_listen: "127.0.0.1:0"', f'admin_listen: "{admin_listen}"') + extra)


def test_exposed_admin_listen_refuses_to_boot_without_admin_insecure(tmp_path: Path) -> None:
    done = _boot(tmp_path, _config("0.0.0.0:8081"), {"T_ADMIN_TOKEN": "t"})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "config.yaml: admin_listen: '0.0.0.0:8081' exposes the admin API on the network without mTLS; bind it to "
        "127.0.0.1, or set admin_tls with client_ca, or set admin_insecure: true deliberately",
        "busbar: 1 config error(s); refusing to start"]


def test_exposed_admin_listen_with_admin_insecure_serves(admin_gateway: Callable[..., AdminGateway]) -> None:
    port = free_port()
    g = admin_gateway(base=BASE.replace('admin_listen: "127.0.0.1:{admin_port}"',
                                        f'admin_listen: "0.0.0.0:{port}"\nadmin_insecure: true'))
    r = httpx.get(f"http://127.0.0.1:{port}{PREFIX}/info", headers={"authorization": f"Bearer {g.token}"})
    assert (r.status_code, r.json()["admin_api_version"]) == (200, "1.0.0")
    assert f"admin_listen: '0.0.0.0:{port}' exposes the admin API on the network without mTLS (admin_insecure: " \
           f"true)" in g.logs()


def test_blank_admin_token_refuses_to_boot(tmp_path: Path) -> None:
    done = _boot(tmp_path, _config("127.0.0.1:0"), {"T_ADMIN_TOKEN": "   "})
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == ("config.yaml: auth.admin_auth[0].admin-tokens.token: environment variable "
                                           "T_ADMIN_TOKEN is empty; set T_ADMIN_TOKEN to the secret")


def test_taken_admin_port_is_a_start_up_failure(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        done = _boot(tmp_path, _config(f"127.0.0.1:{port}"), {"T_ADMIN_TOKEN": "t"})
    assert done.returncode == 1
    assert (f"config.yaml: admin_listen: cannot listen on 127.0.0.1:{port} (Address already in use); free the port "
            f"or choose another admin_listen") in done.stderr


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.yaml"
    p.write_text(text)
    return p


def test_admin_tls_with_client_ca_serves_mtls_on_an_exposed_address(admin_gateway: Callable[..., AdminGateway],
                                                                    tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    server = ca.issue(tmp_path, "admin-server")
    client = ca.issue(tmp_path, "operator", client=True)
    port = free_port()
    g = admin_gateway(f"admin_tls: {{ cert: {{ file: {server.cert_path} }}, key: {{ file: {server.key_path} }}, "
                      f"client_ca: {{ file: {ca.cert_path} }} }}\n",
                      base=BASE.replace('admin_listen: "127.0.0.1:{admin_port}"', f'admin_listen: "0.0.0.0:{port}"'))
    ctx = ssl.create_default_context(cafile=str(ca.cert_path))
    ctx.load_cert_chain(str(client.cert_path), str(client.key_path))
    r = httpx.get(f"https://127.0.0.1:{port}{PREFIX}/info", verify=ctx, headers={"authorization": f"Bearer {g.token}"})
    assert (r.status_code, r.json()["admin_api_version"]) == (200, "1.0.0")
    anonymous = ssl.create_default_context(cafile=str(ca.cert_path))
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"https://127.0.0.1:{port}{PREFIX}/info", verify=anonymous,
                  headers={"authorization": f"Bearer {g.token}"}).raise_for_status()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/healthz")
