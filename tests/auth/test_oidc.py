"""plugins/busbar-auth-oidc: a signed ``kind: auth`` plugin in ``auth.chain``, through a real busbar.

Tokens are minted here (RS256 and ES256, PyJWT); the JWKS is served on loopback. The chain is
``[keys, oidc]``: a valid token identifies its ``sub``, its ``roles`` claim maps through
``auth.role_bindings.oidc`` to pools; a forged, expired, wrong-issuer or wrong-audience token is the
native 401; a role with no binding grants no pool (403); a minted ``bbk_`` key still works.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import jwt
import openai
import pytest
from busbar_sdk.artifact import build_wheels, generate_signing_key, pack_artifact
from busbar_sdk.testing import load_packed
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from tests.auth.conftest import UPSTREAM_KEYS, config
from tests.auth.shapes import assert_refused, forbidden, post
from tests.plugins.test_validate_equals_boot import both
from tests.plugins_firstparty.support import REPO

BUSBAR = str(Path(sys.executable).parent / "busbar")
ISSUER, AUDIENCE = "https://idp.example.test", "busbar"
RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC = ec.generate_private_key(ec.SECP256R1())
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
SIGN = generate_signing_key()


def jwks() -> dict:
    keys = [{**json.loads(RSAAlgorithm.to_jwk(RSA.public_key())), "kid": "rsa1", "alg": "RS256", "use": "sig"},
            {**json.loads(ECAlgorithm.to_jwk(EC.public_key())), "kid": "ec1", "alg": "ES256", "use": "sig"}]
    return {"keys": keys}


class _Jwks(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        data = json.dumps(jwks()).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def token(key=RSA, kid="rsa1", alg="RS256", **claims) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice@example.test", "iat": now, "exp": now + 600,
            "roles": ["eng"], **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm=alg, headers={"kid": kid})


@pytest.fixture(scope="module")
def jwks_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Jwks)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    server.shutdown()


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("oidc")
    (wheel,) = build_wheels([REPO / "plugins" / "busbar-auth-oidc"], root / "wheels")
    schema = (REPO / "plugins" / "busbar-auth-oidc" / "src" / "busbar_auth_oidc" / "settings_schema.json").read_text()
    plugdir = root / "plugins"
    plugdir.mkdir()
    (plugdir / "busbar-auth-oidc-1.5.0.tar.gz").write_bytes(pack_artifact(
        wheel_name=wheel.name, wheel_bytes=wheel.read_bytes(), name="busbar-auth-oidc", alias="oidc", kind="auth",
        version="1.5.0", publisher="acme", signing_key=SIGN[0], settings_schema=schema))
    return plugdir


@pytest.fixture(scope="module")
def gw(busbar_factory, mock, plugin_dir, jwks_url):
    chain = (f'\n    - keys\n    - oidc: {{ settings: {{ issuer: "{ISSUER}", audience: {AUDIENCE}, '
             f'jwks_url: "{jwks_url}" }} }}')
    extra = ('  role_bindings:\n    oidc:\n      eng: { allowed_pools: [to-openai, to-anthropic] }\n'
             '      ops: { }\n      adhoc: { allowed_pools: [up-anthropic] }\n')
    text = config(chain).replace("providers:\n", extra + "providers:\n", 1)
    text += (f'plugins: {{ enabled: true, dir: "{plugin_dir}", trust: {{ publishers: '
             f'[ {{ name: acme, public_key: "{SIGN[1]}" }} ] }} }}\n')
    return busbar_factory(text, mock.url)


@pytest.mark.parametrize(("key", "kid", "alg"), [(RSA, "rsa1", "RS256"), (EC, "ec1", "ES256")])
def test_a_valid_token_is_accepted_by_the_openai_sdk(gw, key, kid, alg):
    c = openai.OpenAI(base_url=gw.url + "/v1", api_key=token(key, kid, alg), max_retries=0)
    r = c.chat.completions.create(model="to-openai", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content


def test_role_bindings_grant_pools(gw):
    t = token()
    assert post(gw.url, "anthropic", {"x-api-key": t}).status_code == 200
    r = post(gw.url, "cohere", {"authorization": f"Bearer {t}"})
    assert (r.status_code, r.json()) == forbidden("cohere", "to-cohere")


@pytest.mark.parametrize("roles", [["ops"], ["unbound"], None])
def test_a_role_without_a_pool_grant_reaches_no_pool(gw, roles):
    r = post(gw.url, "openai", {"authorization": f"Bearer {token(roles=roles)}"})
    if roles == ["ops"]:          # bound, allowed_pools omitted: every pool
        assert r.status_code == 200
    else:
        assert (r.status_code, r.json()) == forbidden("openai", "to-openai")


@pytest.mark.parametrize(("roles", "status"), [(["ops"], 403), (["ops", "adhoc"], 200), (["adhoc", "ops"], 200)])
def test_an_adhoc_route_needs_a_role_listing_the_provider(gw, roles, status):
    r = httpx.post(gw.url + "/up-anthropic/claude-x/v1/messages", timeout=10,
                   headers={"x-api-key": token(roles=roles)},
                   json={"max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
    if status == 200:
        assert r.status_code == 200, r.text
    else:
        assert (r.status_code, r.json()) == forbidden("anthropic", "up-anthropic")


@pytest.mark.parametrize("bad", ["forged", "expired", "issuer", "audience", "kid", "alg-none"])
def test_bad_tokens_get_the_native_refusal(gw, mock, bad):
    t = {"forged": lambda: token(OTHER),
         "expired": lambda: token(exp=int(time.time()) - 120),
         "issuer": lambda: token(iss="https://evil.example.test"),
         "audience": lambda: token(aud="someone-else"),
         "kid": lambda: token(kid="nope"),
         "alg-none": lambda: jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 60},
                                        None, algorithm="none", headers={"kid": "rsa1"})}[bad]()
    for protocol in ("openai", "gemini"):
        assert_refused(post(gw.url, protocol, {"authorization": f"Bearer {t}"}), protocol)
    assert mock.requests() == []


def test_the_jwks_is_cached(gw):
    before = _Jwks.hits
    for _ in range(3):
        assert post(gw.url, "openai", {"authorization": f"Bearer {token(sub=f'u{time.time_ns()}')}"}).status_code == 200
    assert _Jwks.hits == before


def test_a_metadata_jwks_url_does_not_open(plugin_dir, tmp_path):
    plugin = load_packed(plugin_dir / "busbar-auth-oidc-1.5.0.tar.gz", public_key=SIGN[1], workdir=tmp_path)
    try:
        with pytest.raises(ValueError) as e:
            plugin.open({"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": "http://169.254.169.254/jwks"})
        assert "169.254.169.254" in str(e.value) and "metadata" in str(e.value)
        with pytest.raises(ValueError) as e:
            plugin.open({"issuer": ISSUER, "audience": AUDIENCE})
        assert "settings: set exactly one of jwks_url and jwks_file" in str(e.value)
    finally:
        plugin.unload()


def _bad_settings_config(tmp_path, plugin_dir, settings: str) -> Path:
    chain = f"\n    - keys\n    - oidc: {{ settings: {settings} }}"
    text = config(chain).replace("{port}", "0").replace("MOCK", "http://127.0.0.1:9")
    text += (f'plugins: {{ enabled: true, dir: "{plugin_dir}", trust: {{ publishers: '
             f'[ {{ name: acme, public_key: "{SIGN[1]}" }} ] }} }}\n')
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    return cfg


def test_settings_outside_the_plugins_schema_refuse_validate_and_boot_alike(plugin_dir, tmp_path):
    """An HMAC algorithm (a JWKS key would become a shared secret), a misspelt key (roles_claim would
    silently stay 'roles') and a missing audience: every one a config error before the plugin opens."""
    cfg = _bad_settings_config(tmp_path, plugin_dir, f'{{ issuer: "{ISSUER}", jwks_file: /nonexistent, '
                                                      f'algorithms: [RS256, HS256], role_claim: groups, '
                                                      f'leeway_secs: -5 }}')
    where = "config.yaml: auth.chain[1].oidc.settings"
    assert both(cfg, UPSTREAM_KEYS) == [
        f"{where}.algorithms[1]: 'HS256' is not one of RS256, RS384, RS512, ES256, ES384, PS256, EdDSA",
        f"{where}.audience: required",
        f"{where}.leeway_secs: must be >= 0",
        f"{where}.role_claim: unknown setting for oidc (it takes algorithms, allow_hosts, audience, issuer, "
        "jwks_cache_secs, jwks_file, jwks_url, leeway_secs, roles_claim, verdict_ttl_secs)",
        "busbar: 4 config error(s); refusing to start"]


def test_the_plugin_itself_refuses_an_unknown_key_and_an_hmac_algorithm(plugin_dir, tmp_path):
    plugin = load_packed(plugin_dir / "busbar-auth-oidc-1.5.0.tar.gz", public_key=SIGN[1], workdir=tmp_path)
    good = {"issuer": ISSUER, "audience": AUDIENCE, "jwks_file": str(tmp_path / "jwks.json")}
    try:
        with pytest.raises(ValueError) as e:
            plugin.open({**good, "role_claim": "groups"})
        assert str(e.value).endswith("settings.role_claim: unknown setting for oidc (it takes algorithms, allow_hosts, "
                                     "audience, issuer, jwks_cache_secs, jwks_file, jwks_url, leeway_secs, roles_claim, "
                                     "verdict_ttl_secs)")
        for algorithms in (["HS256"], [], "RS256"):
            with pytest.raises(ValueError) as e:
                plugin.open({**good, "algorithms": algorithms})
            assert str(e.value).endswith("settings.algorithms: must list one or more of RS256, RS384, RS512, ES256, "
                                         f"ES384, PS256, EdDSA, found {algorithms!r}")
    finally:
        plugin.unload()


def _admin_config(tmp_path, plugin_dir, settings: str) -> Path:
    """The oidc module in auth.admin_auth (auth.chain: [keys])."""
    cfg = _bad_settings_config(tmp_path, plugin_dir, settings)
    text = cfg.read_text().replace("  chain: \n    - keys\n    - oidc: ", "  chain: [keys]\n  admin_auth:\n    - oidc: ", 1)
    cfg.write_text(text)
    return cfg


STORE_WARNING = ("warning: {src}: store.module: the ephemeral memory store with the keys verifier: minted keys, usage "
                 "and the revocation denylist reset on restart; choose a durable store.module\n")
_JWKS_URL_FAULTS = {
    "https://10.0.0.5/jwks": "10.0.0.5 is a private (RFC 1918 / unique-local) address; refused by the SSRF guard "
                             "(only loopback or public https:// endpoints are allowed here)",
    "http://example.com/jwks": "uses http:// with a non-loopback host (example.com): remote endpoints must use https://",
    "http://169.254.169.254/jwks": "169.254.169.254 is a cloud-metadata endpoint; refused by the SSRF guard (list it in "
                                   "settings.allow_hosts only if this is deliberate)"}


@pytest.mark.parametrize("block", ["chain", "admin_auth"])
@pytest.mark.parametrize("url", list(_JWKS_URL_FAULTS))
def test_a_jwks_url_the_ssrf_guard_refuses_refuses_validate_and_boot_alike(plugin_dir, tmp_path, block, url):
    """jwks_url is an x-busbar-egress-url setting: a config error (exit 2) at --validate and boot, one
    line at its key path, before the plugin opens (it was a start-up error, exit 1, --validate said valid)."""
    settings = f'{{ issuer: "{ISSUER}", audience: {AUDIENCE}, jwks_url: "{url}" }}'
    cfg = (_bad_settings_config if block == "chain" else _admin_config)(tmp_path, plugin_dir, settings)
    where = "auth.chain[1]" if block == "chain" else "auth.admin_auth[0]"
    assert both(cfg, UPSTREAM_KEYS) == [f"config.yaml: {where}.oidc.settings.jwks_url: {_JWKS_URL_FAULTS[url]}",
                                        "busbar: 1 config error(s); refusing to start"]


def test_allow_hosts_lets_a_private_jwks_url_through_the_kernel_and_the_plugin(plugin_dir, tmp_path):
    settings = f'{{ issuer: "{ISSUER}", audience: {AUDIENCE}, jwks_url: "https://10.0.0.5/jwks", allow_hosts: [10.0.0.5] }}'
    cfg = _bad_settings_config(tmp_path, plugin_dir, settings)
    v = subprocess.run([BUSBAR, "--validate", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **UPSTREAM_KEYS, "BUSBAR_LOG": "error"})
    assert (v.returncode, v.stderr) == (0, STORE_WARNING.format(src="config.yaml"))


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/jwks", "http://localhost/jwks", "https://idp.example.test/jwks",
                                 "https://10.0.0.5/jwks", "https://10.1.2.3/jwks", "http://10.0.0.5/jwks",
                                 "http://169.254.169.254/jwks", "https://100.64.0.1/jwks", "http://example.com/jwks",
                                 "https://[fe80::1]/jwks", "ftp://idp.example.test/jwks"])
@pytest.mark.parametrize("security", [{}, {"allow_metadata_hosts": ["169.254.169.254"]}, {"allow_all_metadata": True},
                                      {"blocked_metadata_hosts": ["idp.example.test"]}])
def test_the_kernel_passes_a_jwks_url_exactly_when_the_plugins_own_guard_does(plugin_dir, tmp_path, url, security):
    """The kernel's verdict (busbar.security.egress with the deployment's security: policy) is the
    plugin's at open: its guard starts from the policy the kernel sets (deployment_policy)."""
    from busbar.security.egress import settings_faults
    from busbar_sdk.settings_schema import settings_rules
    from busbar_sdk.ssrf import SsrfPolicy, deployment_policy, set_deployment_policy

    schema = (REPO / "plugins" / "busbar-auth-oidc" / "src" / "busbar_auth_oidc" / "settings_schema.json").read_text()
    plugin = load_packed(plugin_dir / "busbar-auth-oidc-1.5.0.tar.gz", public_key=SIGN[1], workdir=tmp_path)
    before = deployment_policy()
    set_deployment_policy(SsrfPolicy(**security))
    try:
        for allow in ([], ["10.0.0.5"], ["169.254.169.254"]):
            settings = {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": url, "allow_hosts": allow}
            kernel = settings_faults(settings_rules(schema), settings, module="oidc", path="auth.chain[0].oidc",
                                     policy=SsrfPolicy(**security))
            try:
                plugin.open(settings).close()
                opened = True
            except ValueError:
                opened = False
            assert (kernel == []) == opened, (allow, kernel)
    finally:
        set_deployment_policy(before)
        plugin.unload()


def test_a_jwks_file_that_cannot_be_read_refuses_the_start_with_exit_2(plugin_dir, tmp_path):
    """--validate cannot see the file's content without the plugin (it says valid); the plugin reads
    it at open, so the boot refuses (exit 2) with the plugin's line under the config file's own name,
    instead of starting with every token rejected."""
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    for path, why in (("/nonexistent", "cannot read /nonexistent (No such file or directory)"),
                      (str(bad), f"{bad} holds no JWKS (")):
        cfg = _bad_settings_config(tmp_path, plugin_dir, f'{{ issuer: "{ISSUER}", audience: {AUDIENCE}, '
                                                         f'jwks_file: "{path}" }}')
        cfg = cfg.rename(tmp_path / "oi1.yaml")
        v = subprocess.run([BUSBAR, "--validate", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **UPSTREAM_KEYS, "BUSBAR_LOG": "error"})
        assert (v.returncode, v.stderr) == (0, STORE_WARNING.format(src="oi1.yaml"))
        b = subprocess.run([BUSBAR, "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **UPSTREAM_KEYS, "BUSBAR_LOG": "error"})
        lines = b.stderr.splitlines()
        assert b.returncode == 2, b.stderr
        assert len(lines) == 2 and lines[1] == "busbar: 1 start-up error(s); refusing to start", lines
        assert lines[0].startswith("oi1.yaml: auth.chain[1]: auth plugin 'oidc' did not open: "), lines[0]
        assert f"settings.jwks_file: {why}" in lines[0], lines[0]
