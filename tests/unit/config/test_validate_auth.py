"""Startup validation rows for listeners, tls, auth: and store: (docs/config-at-a-glance.md#listen,
docs/config-at-a-glance.md#tls, docs/config-at-a-glance.md#auth,
"store", "plugins", "Startup validation summary"): one minimal config per row, the exact line."""
from __future__ import annotations

import textwrap

import pytest
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text

from tests.support.certs import make_ca, pem_bundle

ENV = {"K": "sk-test", "ADMIN": "s3cret"}
BASE = """\
providers:
  anthropic: { api_key: { env: K } }
models:
  claude: { provider: anthropic }
pools:
  fast: { members: [ { model: claude } ] }
"""


def faults(extra: str, env: dict[str, str] | None = None, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text(BASE + textwrap.dedent(extra), ENV if env is None else env, **kw)  # type: ignore[arg-type]
    return exc.value.faults


def warnings(extra: str, env: dict[str, str] | None = None, **kw: object) -> list[str]:
    return load_config_text(BASE + textwrap.dedent(extra), ENV if env is None else env, **kw).warnings  # type: ignore[arg-type]


class Catalog:
    def __init__(self, **kinds: str):
        self.kinds = kinds

    def kind_of(self, name: str) -> str | None:
        return self.kinds.get(name)


# --- listeners and TLS ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["8080", "localhost", "0.0.0.0:99999", "::1:8080"])
def test_listen_must_be_host_port(value: str) -> None:
    assert faults(f"listen: '{value}'\n") == [
        f"config.yaml: listen: '{value}' is not host:port (e.g. 0.0.0.0:8080, [::1]:8081)"]


def test_admin_listen_collides_with_listen() -> None:
    assert faults("listen: 0.0.0.0:8081\n") == [
        "config.yaml: admin_listen: '127.0.0.1:8081' collides with listen '0.0.0.0:8081'; the admin API runs on its "
        "own listener (default 127.0.0.1:8081)"]


def test_exposed_admin_without_mtls() -> None:
    assert faults("admin_listen: 0.0.0.0:8081\n") == [
        "config.yaml: admin_listen: '0.0.0.0:8081' exposes the admin API on the network without mTLS; bind it to "
        "127.0.0.1, or set admin_tls with client_ca, or set admin_insecure: true deliberately"]
    assert "config.yaml: admin_listen: '0.0.0.0:8081' exposes the admin API on the network without mTLS " \
           "(admin_insecure: true)" in warnings("admin_listen: 0.0.0.0:8081\nadmin_insecure: true\n")
    mtls = ("admin_listen: '[::]:8081'\nadmin_tls: { cert: { file: /c.pem }, key: { file: /k.pem }, "
            "client_ca: { file: /ca.pem } }\n")
    load_config_text(BASE + mtls, ENV, read_file=lambda p: pem_bundle())
    load_config_text(BASE + "admin_listen: '[::1]:8081'\n", ENV)
    load_config_text(BASE + "admin_listen: localhost:9000\n", ENV)


def test_tls_files_must_hold_pem() -> None:
    tls = "tls: { cert: { file: /etc/busbar/tls/fullchain.pem }, key: { env: TLS_KEY } }\n"
    assert faults(tls, env={**ENV, "TLS_KEY": ""}, read_file=lambda p: "hello") == [
        "config.yaml: tls.key: environment variable TLS_KEY is empty; set TLS_KEY to the secret",
        "config.yaml: tls.cert: /etc/busbar/tls/fullchain.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----); "
        "point it at the certificate chain, leaf first"]
    assert faults(tls, env={**ENV, "TLS_KEY": "x"}) == [
        "config.yaml: tls.cert: cannot read secret file /etc/busbar/tls/fullchain.pem: No such file or directory; "
        "fix the path or its permissions",
        "config.yaml: tls.key: environment variable TLS_KEY is not a PEM private key (PKCS#8, PKCS#1 or SEC1); "
        "point it at the key file"]


def test_tls_key_must_be_unencrypted_and_match_the_leaf(tmp_path) -> None:
    from cryptography.hazmat.primitives import serialization

    other = make_ca(tmp_path).issue(tmp_path, "other")
    tls = "tls: { cert: { file: /etc/busbar/tls/fullchain.pem }, key: { env: TLS_KEY } }\n"
    assert faults(tls, env={**ENV, "TLS_KEY": pem_bundle()}, read_file=lambda p: other.cert_path.read_text()) == [
        "config.yaml: tls.key: environment variable TLS_KEY does not match the first certificate of tls.cert; the "
        "chain must start with this key's certificate"]
    key = serialization.load_pem_private_key(other.key_path.read_bytes(), None)
    locked = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.BestAvailableEncryption(b"pw")).decode()
    assert faults(tls, env={**ENV, "TLS_KEY": locked}, read_file=lambda p: other.cert_path.read_text()) == [
        "config.yaml: tls.key: environment variable TLS_KEY is an encrypted private key; busbar needs it "
        "unencrypted (protect the file instead)"]
    rsa_pkcs1 = _rsa_leaf_pkcs1(tmp_path)       # PKCS#1 (BEGIN RSA PRIVATE KEY) and its certificate
    load_config_text(BASE + tls, {**ENV, "TLS_KEY": rsa_pkcs1[1]}, read_file=lambda p: rsa_pkcs1[0])


def _rsa_leaf_pkcs1(tmp_path) -> tuple[str, str]:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rsa")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    assert pem_key.startswith("-----BEGIN RSA PRIVATE KEY-----")
    return cert.public_bytes(serialization.Encoding.PEM).decode(), pem_key


# --- auth chains --------------------------------------------------------------------------------------


def test_chain_module_needs_plugins_or_the_catalog() -> None:
    assert faults("auth: { chain: [keys, oidc] }\n") == [
        "config.yaml: auth.chain[1]: 'oidc' is a kind: auth plugin but plugins.enabled is false; set "
        "plugins.enabled: true and install its tarball in plugins.dir"]
    enabled = "plugins: { enabled: true }\nauth: { chain: [keys, oidc, ldap] }\n"
    assert faults(enabled, plugins=Catalog(oidc="auth", ldap="hook")) == [
        "config.yaml: auth.chain[2]: 'ldap' is a kind: hook plugin, not a kind: auth plugin; name a kind: auth "
        "plugin"]


def test_builtin_modules_in_the_wrong_chain_and_token_on_the_wrong_module() -> None:
    assert faults("auth: { chain: [admin-tokens, keys, keys], admin_auth: [keys] }\n") == [
        "config.yaml: auth.chain[0]: admin-tokens gates the admin API only; move it to auth.admin_auth",
        "config.yaml: auth.chain[2]: 'keys' is listed twice; keep one entry per module",
        "config.yaml: auth.admin_auth[0]: keys verifies data-plane keys, which carry no admin scope; use "
        "admin-tokens or an identity-provider auth plugin"]
    assert faults("auth: { chain: [ { keys: { token: { env: ADMIN } } } ] }\n") == [
        "config.yaml: auth.chain[0].keys.token: token: is for the built-in admin-tokens module only; remove it"]


def test_fields_a_builtin_module_would_ignore_are_refused() -> None:
    text = ("auth:\n  chain: [ { keys: { max_admin_scope: full, settings: { ttl: 5 } } } ]\n"
            "  admin_auth:\n    - admin-tokens: { token: { env: ADMIN }, max_admin_scope: read-only, settings: { a: 1 } }\n")
    assert faults(text, env={"K": "sk", "ADMIN": "t0k"}) == [
        "config.yaml: auth.chain[0].keys.settings: the built-in keys module takes no settings; remove them",
        "config.yaml: auth.chain[0].keys.max_admin_scope: keys verifies data-plane keys, which carry no admin scope, "
        "so a ceiling here would do nothing; remove it",
        "config.yaml: auth.admin_auth[0].admin-tokens.settings: the built-in admin-tokens module takes no settings; "
        "remove them",
        "config.yaml: auth.admin_auth[0].admin-tokens.max_admin_scope: admin-tokens is the root operator credential, "
        "exempt from any ceiling, so a ceiling here would do nothing; remove it"]
    loaded = warnings("auth: { chain: [ { keys: { settings: {} } } ] }\n")      # an empty map asks for nothing
    assert not [w for w in loaded if "keys.settings" in w]


def test_admin_token_blank() -> None:
    admin = "auth:\n  admin_auth:\n    - admin-tokens: { token: { env: ADMIN } }\n"
    assert faults(admin, env={"K": "sk", "ADMIN": "   "}) == [
        "config.yaml: auth.admin_auth[0].admin-tokens.token: environment variable ADMIN is empty; set ADMIN to the "
        "secret"]
    assert faults(admin, env={"K": "sk"}) == [
        "config.yaml: auth.admin_auth[0].admin-tokens.token: environment variable ADMIN is not set; export ADMIN "
        "(or point the reference at { file: /path })"]
    assert warnings(admin) == ["config.yaml: auth.chain: [] is an open front door: no client authentication "
                               "(development only)"]


def test_role_bindings_faults() -> None:
    text = """\
    plugins: { enabled: true }
    groups: { acme: {} }
    auth:
      chain: [keys, ad]
      role_bindings:
        ad:
          growth-eng: { allowed_pools: [fast, slow], group: growth }
          platform: { group: acme, admin_scope: full }
        oidc:
          dev: { group: acme }
        keys:
          x: {}
    """
    assert faults(text) == [
        "config.yaml: auth.role_bindings.ad.growth-eng.group: 'growth' is not a configured group; add it under "
        "groups: or fix the name",
        "config.yaml: auth.role_bindings.ad.growth-eng.allowed_pools[1]: 'slow' is not a configured pool, model or "
        "provider; fix the name (omit allowed_pools for all pools)",
        "config.yaml: auth.role_bindings.oidc: 'oidc' is not a module in auth.chain or auth.admin_auth (modules: "
        "ad); bind roles under the module that asserts them",
        "config.yaml: auth.role_bindings.keys: keys asserts no roles, so these bindings can never apply; bind roles "
        "under an identity-provider module"]


def test_auth_entry_shapes() -> None:
    assert faults("auth: { chain: [ { a: {}, b: {} } ] }\n") == [
        "config.yaml: auth.chain[0]: an entry names exactly one module; write one list entry per module"]
    assert faults("auth: { chain: [ 5 ] }\n") == [
        "config.yaml: auth.chain[0]: must be a module name (- keys) or a single-key map (- <module>: { "
        "max_admin_scope?, settings?, token? }), found 5"]
    assert faults("plugins: { enabled: true }\nauth: { chain: [ { ad: { max_admin_scope: root } } ] }\n") == [
        "config.yaml: auth.chain[0].ad.max_admin_scope: 'root' is not allowed; use 'read-only', 'hooks-register', "
        "'mint' or 'full'"]
    cfg = load_config_text(BASE + "auth: { chain: [ keys: ] }\n", ENV).config
    assert cfg.auth.modules("chain")[0].name == "keys"


def test_signing_key_that_resolves_empty() -> None:
    assert faults("auth: { signing_key: { env: SIGNING } }\n") == [
        "config.yaml: auth.signing_key: environment variable SIGNING is not set; export SIGNING (or point the "
        "reference at { file: /path })"]
    assert faults("auth: { signing_key: { file: /k } }\n", read_file=lambda p: " \n") == [
        "config.yaml: auth.signing_key: secret file /k is empty; write the secret into it"]


def test_auth_warnings() -> None:
    assert warnings("auth: { chain: [keys], admin_auth: [] }\n") == [
        "config.yaml: auth.admin_auth: [] is an OPEN admin API: no admin authentication (development only)",
        "config.yaml: store.module: the ephemeral memory store with the keys verifier: minted keys, usage and the "
        "revocation denylist reset on restart; choose a durable store.module"]


# --- store --------------------------------------------------------------------------------------------


def test_plugin_store_without_plugins_names_the_flag() -> None:
    assert faults("store: { module: postgres, settings: { url: 'postgres://h/db' } }\n") == [
        "config.yaml: store.module: 'postgres' is a kind: store plugin but plugins.enabled is false; set "
        "plugins.enabled: true and install its tarball in plugins.dir"]


def test_plugin_store_unresolved_with_the_catalog() -> None:
    text = "plugins: { enabled: true }\nstore: { module: dynamo }\n"
    assert faults(text, plugins=Catalog()) == [
        "config.yaml: store.module: 'dynamo' does not resolve to a loadable plugin in plugins.dir (plugins); "
        "install its signed tarball or fix the name (busbar --list-plugins shows what loads)"]
    assert warnings(text, plugins=Catalog(dynamo="store")) == [
        "config.yaml: auth.chain: [] is an open front door: no client authentication (development only)"]


class StoreCatalog(Catalog):
    """A catalog serving one store plugin's manifest name and settings schema (None: it has none)."""

    def __init__(self, name: str, schema: str | None, **kinds: str):
        super().__init__(**kinds)
        self.name, self.schema = name, schema

    def name_of(self, name: str) -> str | None:
        return self.name if name in self.kinds else None

    def settings_schema_of(self, name: str) -> str | None:
        return self.schema if name in self.kinds else None


def test_store_settings_against_a_third_party_manifest_schema() -> None:
    schema = ('{"type": "object", "additionalProperties": false, "required": ["table"], "properties": {'
              '"table": {"type": "string", "minLength": 3}, "rcu": {"type": "integer", "maximum": 40000}}}')
    text = "plugins: { enabled: true }\nstore: { module: dynamo, settings: { table: ab, rcu: 50000, wcu: 1 } }\n"
    assert faults(text, plugins=StoreCatalog("acme-store-dynamo", schema, dynamo="store")) == [
        "config.yaml: store.settings.wcu: unknown setting for the acme-store-dynamo store (it takes rcu, table)",
        "config.yaml: store.settings.table: must be at least 3 characters",
        "config.yaml: store.settings.rcu: must be <= 40000"]
    open_schema = '{"type": "object", "properties": {"rcu": {"type": "number", "minimum": 1}}}'
    assert faults(text.replace("rcu: 50000", "rcu: x"), plugins=StoreCatalog("dyn", open_schema, dynamo="store")) \
        == ["config.yaml: store.settings.rcu: expected a number, got str"]


def test_store_settings_unchecked_without_a_schema_or_the_catalog() -> None:
    text = "plugins: { enabled: true }\nstore: { module: dynamo, settings: { anything: [1] } }\n"
    assert warnings(text, plugins=StoreCatalog("acme-store-dynamo", None, dynamo="store")) == [
        "config.yaml: auth.chain: [] is an open front door: no client authentication (development only)"]
    assert warnings(text, plugins=Catalog(dynamo="store")) == [        # a catalog that serves no schemas
        "config.yaml: auth.chain: [] is an open front door: no client authentication (development only)"]


def test_memory_store_takes_no_settings() -> None:
    assert faults("store: { settings: { db_path: x.db } }\n") == [
        "config.yaml: store.settings: the compiled-in memory store takes no settings; remove them or choose a "
        "durable store.module"]


def test_role_bindings_under_a_plugins_own_name_with_the_catalog() -> None:
    class Named(Catalog):
        def names_of(self, name: str) -> set[str]:
            return {"busbar-auth-oidc", "oidc"} if name == "oidc" else set()

    text = "plugins: { enabled: true }\nauth:\n  chain: [oidc]\n  role_bindings:\n    busbar-auth-oidc: { dev: {} }\n"
    assert faults(text) == [
        "config.yaml: auth.role_bindings.busbar-auth-oidc: 'busbar-auth-oidc' is not a module in auth.chain or "
        "auth.admin_auth (modules: oidc); bind roles under the module that asserts them"]
    load_config_text(BASE + text, ENV, plugins=Named(oidc="auth"))
