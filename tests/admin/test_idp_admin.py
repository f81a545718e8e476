"""An identity provider gating the admin API: the signed first-party OIDC plugin in
``auth.admin_auth`` behind a real busbar. A token's roles earn admin scopes through
``auth.role_bindings.oidc.<role>.admin_scope``, capped by the entry's ``max_admin_scope`` (an
incomparable grant falls to read-only, an unbound role earns nothing); the operator token keeps
``full`` (docs/admin.md#authentication)."""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.admin.conftest import BASE, PREFIX, AdminGateway

ROOT = Path(__file__).resolve().parents[2]
ISSUER, AUDIENCE = "https://idp.example.test", "busbar-admin"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
FORGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def token(roles: list[str], key: rsa.RSAPrivateKey = KEY, sub: str = "alice@example.test", life: int = 600) -> str:
    now = int(time.time())
    return jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now - 7200, "exp": now + life,
                       "roles": roles},
                      key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture(scope="module")
def idp_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminGateway]:
    tmp = tmp_path_factory.mktemp("idp")
    jwks = tmp / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**json.loads(RSAAlgorithm.to_jwk(KEY.public_key())), "kid": "k1",
                                          "alg": "RS256", "use": "sig"}]}))
    base = BASE.replace("    - admin-tokens: {{ token: {{ env: T_ADMIN_TOKEN }} }}\n",
                        "    - admin-tokens: {{ token: {{ env: T_ADMIN_TOKEN }} }}\n"
                        f"    - oidc: {{{{ max_admin_scope: mint, settings: {{{{ issuer: \"{ISSUER}\", "
                        f"audience: {AUDIENCE}, jwks_file: \"{jwks}\" }}}} }}}}\n"
                        "  role_bindings:\n    oidc:\n"
                        "      viewer: {{ admin_scope: read-only }}\n"
                        "      root: {{ admin_scope: full }}\n"
                        "      hooker: {{ admin_scope: hooks-register }}\n"
                        "      user: {{ allowed_pools: [fast] }}\n")
    plugins = tmp / "plugins"          # only the OIDC tarball: a quicker boot
    plugins.mkdir()
    shutil.copy(ROOT / "dist" / "plugins" / "busbar-auth-oidc-1.5.0.tar.gz", plugins)
    g = AdminGateway(tmp, f"plugins: {{ enabled: true, dir: {plugins} }}\n", base=base)
    g.start()
    yield g
    g.stop()


def call(g: AdminGateway, method: str, path: str, tok: str, body: object = None) -> httpx.Response:
    return httpx.request(method, g.admin + PREFIX + path, json=body, headers={"authorization": f"Bearer {tok}"},
                         timeout=30)


def test_a_read_only_role_reads_and_cannot_mint(idp_gw: AdminGateway) -> None:
    t = token(["viewer"])
    assert call(idp_gw, "GET", "/keys", t).status_code == 200
    r = call(idp_gw, "POST", "/keys", t, {"name": "x"})
    assert (r.status_code, r.json()) == (403, {"error": {"code": "forbidden", "message":
                                                         "POST /api/v1/admin/keys needs the 'mint' admin scope; "
                                                         "this credential holds read-only"}})


def test_full_is_capped_by_max_admin_scope(idp_gw: AdminGateway) -> None:
    t = token(["root"])
    minted = call(idp_gw, "POST", "/keys", t, {"name": "portal-key"})
    assert minted.status_code == 201
    kid = minted.json()["id"]
    r = call(idp_gw, "POST", f"/keys/{kid}/revoke", t)
    assert (r.status_code, r.json()["error"]["message"]) == (
        403, "POST /api/v1/admin/keys/{key_id}/revoke needs the 'full' admin scope; this credential holds mint")
    audit = idp_gw.client.get("/audit", params={"action": "key.mint"}).json()["items"]
    assert [a["principal"] for a in audit if a["resource"] == f"key/{kid}"] == ["oidc:alice@example.test"]
    assert idp_gw.client.post(f"/keys/{kid}/revoke").status_code == 200      # the operator token: full


def test_incomparable_grant_falls_to_read_only_and_unbound_earns_nothing(idp_gw: AdminGateway) -> None:
    r = call(idp_gw, "POST", "/keys", token(["hooker"]), {"name": "x"})
    assert r.json()["error"]["message"].endswith("this credential holds read-only")
    assert call(idp_gw, "GET", "/keys", token(["hooker"])).status_code == 200
    none = call(idp_gw, "GET", "/keys", token(["user", "stranger"]))
    assert (none.status_code, none.json()["error"]["message"]) == (
        403, "GET /api/v1/admin/keys needs the 'read-only' admin scope; this credential holds no admin scope")
    both = call(idp_gw, "GET", "/keys", token(["viewer", "root"]))
    assert both.status_code == 200


def test_forged_expired_or_foreign_tokens_are_401(idp_gw: AdminGateway) -> None:
    for bad in (token(["root"], key=FORGER), token(["root"], life=-3600), "not-a-jwt"):
        r = call(idp_gw, "GET", "/keys", bad)
        assert (r.status_code, r.json()["error"]["code"], r.headers["www-authenticate"]) == (
            401, "unauthorized", "Bearer")


def test_the_entry_needs_a_loaded_auth_plugin(admin_gateway: Callable[..., AdminGateway]) -> None:
    base = BASE.replace("    - admin-tokens: {{ token: {{ env: T_ADMIN_TOKEN }} }}\n",
                        "    - admin-tokens: {{ token: {{ env: T_ADMIN_TOKEN }} }}\n    - oidc\n")
    with pytest.raises(RuntimeError) as e:
        admin_gateway(base=base)
    assert (".yaml: auth.admin_auth[1]: 'oidc' is a kind: auth plugin but plugins.enabled is false; set "
            "plugins.enabled: true and install its tarball in plugins.dir\n") in str(e.value)
