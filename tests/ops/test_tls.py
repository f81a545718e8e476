"""``tls:`` on the data listener through a real busbar (docs/operations.md#tls-and-mtls): the openai SDK
over HTTPS with the test CA, mutual TLS accepted with a client certificate and refused without one,
a stalled handshake cut at ``limits.tls_handshake_timeout_secs``, and unusable PEM files refused at
boot (and by ``--validate``) naming the file."""
from __future__ import annotations

import socket
import ssl
import subprocess
import time

import httpx
import openai
import pytest

from tests.support.gateway import BIN

BASE = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  tls-m: { provider: up-openai }
pools:
  tls-pool: { members: [ { model: tls-m } ] }
"""


def _tls(pki, *, mtls: bool) -> str:
    ca = f", client_ca: {{ file: {pki.ca.cert_path} }}" if mtls else ""
    return (f"tls: {{ cert: {{ file: {pki.server.cert_path} }}, key: {{ file: {pki.server.key_path} }}{ca} }}\n"
            "limits: { tls_handshake_timeout_secs: 1 }\n")


@pytest.fixture(scope="module")
def https_gw(gateway_factory, mock, pki):
    return gateway_factory(BASE + _tls(pki, mtls=False), mock.url, verify=pki.client_context(with_cert=False))


@pytest.fixture(scope="module")
def mtls_gw(gateway_factory, mock, pki):
    return gateway_factory(BASE + _tls(pki, mtls=True), mock.url, verify=pki.client_context(with_cert=True))


def test_openai_sdk_over_https_with_the_ca(https_gw, pki):
    assert https_gw.url.startswith("https://127.0.0.1:")
    client = openai.OpenAI(base_url=https_gw.url + "/v1", api_key="x", max_retries=0,
                           http_client=httpx.Client(verify=pki.client_context(with_cert=False)))
    r = client.chat.completions.create(model="tls-pool", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.role == "assistant"
    assert r.model


def test_https_listener_negotiates_http11_by_alpn(https_gw, pki):
    host, port = https_gw.url.removeprefix("https://").split(":")
    ctx = pki.client_context(with_cert=False)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.selected_alpn_protocol() == "http/1.1"
        assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_plain_http_to_the_https_listener_gets_no_http_answer(https_gw):
    with pytest.raises(httpx.HTTPError):
        httpx.get(https_gw.url.replace("https://", "http://") + "/healthz", timeout=3)


def test_mtls_client_with_a_certificate_is_served(mtls_gw, pki):
    client = openai.OpenAI(base_url=mtls_gw.url + "/v1", api_key="x", max_retries=0,
                           http_client=httpx.Client(verify=pki.client_context(with_cert=True)))
    r = client.chat.completions.create(model="tls-pool", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.role == "assistant"


def test_mtls_client_without_a_certificate_is_refused_at_the_handshake(mtls_gw, pki, mock):
    host, port = mtls_gw.url.removeprefix("https://").split(":")
    tls12 = pki.client_context(with_cert=False)
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            pytest.raises(ssl.SSLError):                  # TLS 1.2: the handshake itself fails
        tls12.wrap_socket(raw, server_hostname="127.0.0.1")
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        # TLS 1.3: the server judges the (absent) client certificate after the client's Finished and
        # drops the connection: the request is never read, no HTTP byte comes back
        tls = pki.client_context(with_cert=False).wrap_socket(raw, server_hostname="127.0.0.1")
        try:
            tls.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            got = tls.recv(100)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            got = b""
        tls.close()
    assert got == b""
    with pytest.raises(httpx.HTTPError):
        httpx.post(mtls_gw.url + "/v1/chat/completions", json={"model": "tls-pool", "messages": []},
                   verify=pki.client_context(with_cert=False), timeout=5)
    assert mock.requests() == []


def test_stalled_handshake_is_cut_at_the_deadline(https_gw):
    host, port = https_gw.url.removeprefix("https://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(b"\x16\x03\x01")                 # the start of a ClientHello, never finished
        t0 = time.monotonic()
        assert raw.recv(100) == b""                  # the server closes the connection
        waited = time.monotonic() - t0
    assert 0.7 < waited < 4.0, waited                # tls_handshake_timeout_secs: 1


def _validate_and_boot(tmp_path, yaml: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.replace("{port}", "0").replace("MOCK", "http://127.0.0.1:9"))
    env = {"T_OPENAI_KEY": "sk-x", "PATH": "/usr/bin:/bin"}
    check = subprocess.run([str(BIN / "busbar"), "--validate", "--config", str(cfg)], env=env,
                           capture_output=True, text=True, timeout=30)
    boot = subprocess.run([str(BIN / "busbar"), "--config", str(cfg)], env=env, capture_output=True, text=True,
                          timeout=30)
    return check, boot


def test_unusable_pem_files_refuse_the_boot_naming_the_file(tmp_path, pki):
    not_pem = tmp_path / "junk.pem"
    not_pem.write_text("hello")
    other = pki.ca.issue(tmp_path, "other")
    missing = tmp_path / "missing.pem"
    yaml = BASE + (f"tls: {{ cert: {{ file: {other.cert_path} }}, key: {{ file: {pki.server.key_path} }}, "
                   f"client_ca: {{ file: {not_pem} }} }}\n")
    check, boot = _validate_and_boot(tmp_path, yaml)
    lines = [
        f"config.yaml: tls.key: {pki.server.key_path} does not match the first certificate of tls.cert; the chain "
        f"must start with this key's certificate",
        f"config.yaml: tls.client_ca: {not_pem} holds no PEM certificate (-----BEGIN CERTIFICATE-----); point it at "
        f"the CA bundle that signs client certificates"]
    assert check.returncode == 2 and boot.returncode == 2
    assert check.stderr.splitlines()[:2] == lines
    assert boot.stderr.splitlines()[:2] == lines
    assert "BEGIN PRIVATE KEY" not in boot.stderr and pki.server.key_path.read_text()[40:80] not in boot.stderr
    yaml = BASE + f"tls: {{ cert: {{ file: {missing} }}, key: {{ file: {other.cert_path} }} }}\n"
    check, boot = _validate_and_boot(tmp_path, yaml)
    assert check.stderr.splitlines()[:2] == boot.stderr.splitlines()[:2] == [
        f"config.yaml: tls.cert: cannot read secret file {missing}: No such file or directory; fix the path or its "
        f"permissions",
        f"config.yaml: tls.key: {other.cert_path} is not a PEM private key (PKCS#8, PKCS#1 or SEC1); point it at "
        f"the key file"]


def test_admin_listener_serves_mtls_with_admin_tls(gateway_factory, mock, pki):
    from tests.support.gateway import free_port

    admin_port = free_port()
    yaml = BASE + (f'admin_listen: "0.0.0.0:{admin_port}"\n'
                   f"admin_tls: {{ cert: {{ file: {pki.server.cert_path} }}, key: {{ file: {pki.server.key_path} }}, "
                   f"client_ca: {{ file: {pki.ca.cert_path} }} }}\n"
                   "auth: { admin_auth: [ { admin-tokens: { token: { env: T_ADMIN } } } ] }\n")
    gw = gateway_factory(yaml, mock.url, env={"T_ADMIN": "adm-secret", "BUSBAR_LOG": "info"})
    admin = f"https://127.0.0.1:{admin_port}"
    assert f"busbar admin API listening on https://0.0.0.0:{admin_port}" in gw.logs()
    r = httpx.get(admin + "/api/v1/admin/keys", headers={"authorization": "Bearer adm-secret"},
                  verify=pki.client_context(with_cert=True))
    assert r.status_code == 200
    with pytest.raises(httpx.HTTPError):                  # no client certificate: refused by TLS
        httpx.get(admin + "/api/v1/admin/keys", headers={"authorization": "Bearer adm-secret"},
                  verify=pki.client_context(with_cert=False), timeout=5)
