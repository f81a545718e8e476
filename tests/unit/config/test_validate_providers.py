"""Startup validation rows for providers.yaml, config.yaml providers: and models:
(docs/configuration.md#startup-checks, docs/config-at-a-glance.md#providers, docs/config-at-a-glance.md#models,
docs/config-at-a-glance.md#security): one minimal config per row, the exact line."""
from __future__ import annotations

import textwrap

import pytest
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text

ENV = {"K": "sk-test"}
MODEL = "models:\n  m: { provider: p }\n"
META_REFUSED = ("is a cloud-metadata endpoint; refused by the SSRF guard (list it in allow_metadata_hosts "
                "only if this is deliberate)")


def faults(text: str, env: dict[str, str] | None = None, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text(textwrap.dedent(text), ENV if env is None else env, **kw)  # type: ignore[arg-type]
    return exc.value.faults


def provider(fields: str, name: str = "p") -> str:
    return f"providers:\n  {name}: {{ {fields}, api_key: {{ env: K }} }}\n" + MODEL.replace(" p ", f" {name} ")


@pytest.mark.parametrize("name", ["admin", "admin/eu"])
def test_provider_name_reserved(name: str) -> None:
    assert faults(provider("protocol: openai, base_url: https://api.example.com", f'"{name}"')) == [
        f"config.yaml: providers.{name}: the provider name '{name}' is reserved; rename it"]


def test_protocol_unknown() -> None:
    assert faults(provider("protocol: grpc, base_url: https://api.example.com")) == [
        "config.yaml: providers.p.protocol: unknown protocol 'grpc'; use one of anthropic, openai, gemini, "
        "bedrock, responses, cohere"]


def test_auth_value_unknown() -> None:
    assert faults(provider("protocol: openai, base_url: https://api.example.com, auth: basic")) == [
        "config.yaml: providers.p.auth: unknown auth 'basic'; use one of bearer, api-key, jwt-bearer, "
        "oauth-client-credentials (omit it for the protocol's native scheme)"]


def test_error_map_value_unknown() -> None:
    assert faults(provider('protocol: openai, base_url: https://api.example.com, error_map: { "1113": bill }')) == [
        "config.yaml: providers.p.error_map.1113: unknown disposition class 'bill'; use one of rate_limit, "
        "overloaded, server_error, timeout, network, auth, billing, client_error, context_length"]


@pytest.mark.parametrize("field", ["path", "path_base"])
def test_path_malformed(field: str) -> None:
    assert faults(provider(f"protocol: openai, base_url: https://api.example.com, {field}: v1/chat")) == [
        f"config.yaml: providers.p.{field}: 'v1/chat' must begin with / (write /v1/chat)"]


def test_catalog_entries_are_checked_where_written() -> None:
    catalog = "acme:\n  protocol: soap\n  base_url: https://api.acme.example\n  error_map: { E1: nope }\n"
    assert faults(provider("protocol: openai, base_url: https://api.example.com"), providers_text=catalog) == [
        "providers.yaml: acme.protocol: unknown protocol 'soap'; use one of anthropic, openai, gemini, bedrock, "
        "responses, cohere",
        "providers.yaml: acme.error_map.E1: unknown disposition class 'nope'; use one of rate_limit, "
        "overloaded, server_error, timeout, network, auth, billing, client_error, context_length"]


def test_provider_not_in_catalog_needs_base_url() -> None:
    assert faults(provider("protocol: openai")) == [
        "config.yaml: providers.p: 'p' is not in the provider catalog, so base_url is required; add base_url: "
        "https://... (and protocol:, default anthropic) or fix the name"]


@pytest.mark.parametrize("host, shown", [
    ("169.254.169.254", "169.254.169.254"),
    ("100.100.100.200", "100.100.100.200"),
    ("metadata.google.internal", "metadata.google.internal"),
    ("2852039166", "2852039166 (= 169.254.169.254)"),                  # decimal integer
    ("0xA9FEA9FE", "0xa9fea9fe (= 169.254.169.254)"),                  # hex
    ("0251.0376.0251.0376", "0251.0376.0251.0376 (= 169.254.169.254)"),  # octal
    ("[::ffff:169.254.169.254]", "::ffff:169.254.169.254 (= 169.254.169.254)"),  # IPv4-mapped IPv6
], ids=["imds", "alibaba", "gcp-name", "decimal", "hex", "octal", "v4-mapped"])
def test_base_url_ssrf_metadata_in_every_spelling(host: str, shown: str) -> None:
    assert faults(provider(f"protocol: openai, base_url: 'https://{host}/v1'")) == [
        f"config.yaml: providers.p.base_url: {shown} {META_REFUSED}"]


def test_base_url_plaintext_to_public_host() -> None:
    assert faults(provider("protocol: openai, base_url: 'http://api.example.com'")) == [
        "config.yaml: providers.p.base_url: uses http:// with a public host: plain HTTP would expose the API key "
        "on the wire; use https://"]


def test_plain_http_to_private_and_loopback_hosts_is_allowed() -> None:
    text = ("providers:\n  a: { protocol: openai, base_url: 'http://10.1.2.3:8000', api_key: { env: K } }\n"
            "  b: { protocol: openai, base_url: 'http://127.0.0.1:11434', api_key: { env: K } }\n"
            "models:\n  m: { provider: a }\n  n: { provider: b }\n")
    assert load_config_text(text, ENV).config.providers["a"].base_url == "http://10.1.2.3:8000"


def test_ssrf_security_overrides() -> None:
    """security.allow_metadata_hosts (global), a provider's allow_metadata_hosts (surgical), and
    security.blocked_metadata_hosts (an extra denied host) all reach the one guard."""
    base = ("providers:\n"
            "  a: { protocol: openai, base_url: 'https://metadata.google.internal', api_key: { env: K }, "
            "allow_metadata_hosts: [metadata.google.internal] }\n"
            "  b: { protocol: openai, base_url: 'https://metadata.goog', api_key: { env: K } }\n"
            "  c: { protocol: openai, base_url: 'https://llm.corp.example', api_key: { env: K } }\n"
            "models:\n  m: { provider: a }\n")
    assert faults(base + "security: { blocked_metadata_hosts: [llm.corp.example] }\n") == [
        f"config.yaml: providers.b.base_url: metadata.goog {META_REFUSED}",
        f"config.yaml: providers.c.base_url: llm.corp.example {META_REFUSED}"]
    loaded = load_config_text(base + "security: { allow_metadata_hosts: [metadata.goog] }\n", ENV)
    assert loaded.config.security.allow_metadata_hosts == ["metadata.goog"]


def test_ssrf_refusal_names_the_catalog_when_the_url_is_not_overridden() -> None:
    catalog = "evil:\n  protocol: openai\n  base_url: http://169.254.169.254/latest\n"
    assert faults("providers:\n  evil: { api_key: { env: K } }\nmodels:\n  m: { provider: evil }\n",
                  providers_text=catalog) == [
        f"config.yaml: providers.evil.base_url: 169.254.169.254 {META_REFUSED} (this base_url comes from the "
        f"provider catalog; override it here)"]


def test_bad_allow_metadata_hosts_entry() -> None:
    assert faults(provider("protocol: openai, base_url: https://api.example.com, allow_metadata_hosts: ['a b']")) == [
        "config.yaml: providers.p.allow_metadata_hosts[0]: 'a b' is not a host name, IP address or CIDR "
        "(invalid host 'a b')"]


def test_oauth_client_credentials_needs_token_url_and_scope_and_token_url_is_guarded() -> None:
    assert faults(provider("protocol: openai, base_url: https://x.example.com, auth: oauth-client-credentials")) == [
        "config.yaml: providers.p.token_url: required by auth: oauth-client-credentials; add token_url: "
        "https://login.example.com/oauth2/token",
        "config.yaml: providers.p.scope: required by auth: oauth-client-credentials; add scope: "
        "https://cognitiveservices.azure.com/.default"]
    assert faults(provider("protocol: openai, base_url: https://x.example.com, auth: oauth-client-credentials, "
                           "token_url: 'http://login.example.com/token', scope: s")) == [
        "config.yaml: providers.p.token_url: uses http:// with a public host: plain HTTP would expose the API "
        "key on the wire; use https://"]


def test_model_name_reserved_and_provider_reference_missing() -> None:
    text = "providers:\n  anthropic: { api_key: { env: K } }\nmodels:\n  admin: { provider: anthropic }\n" \
           "  orphan: { provider: ghost }\n"
    assert faults(text) == [
        "config.yaml: models.admin: the model name 'admin' is reserved; rename it",
        "config.yaml: models.orphan.provider: 'ghost' is not defined under providers; fix the name or add the "
        "provider"]


@pytest.mark.parametrize("field, value, line", [
    ("max_concurrent", 0, "must be ≥ 1 (0 never grants a permit; omit it for unbounded)"),
    ("max_requests", 0, "0 is not allowed; must be -1 (unlimited) or ≥ 1 (0 is a permanently unusable lane; "
                        "default -1)"),
    ("max_requests", -5, "-5 is not allowed; must be -1 (unlimited) or ≥ 1 (0 is a permanently unusable lane; "
                         "default -1)"),
    ("default_max_tokens", 0, "must be > 0 (it is injected upstream and a 0 is rejected; omit it for "
                              "limits.default_max_tokens)"),
    ("attempt_timeout_ms", 0, "must be ≥ 1 (omit it for no per-attempt cap)"),
    ("upstream_model", '" "', "must be non-empty when set (omit it to send 'm')"),
])
def test_model_field_rules(field: str, value: object, line: str) -> None:
    text = f"providers:\n  anthropic: {{ api_key: {{ env: K }} }}\nmodels:\n  m: {{ provider: anthropic, {field}: {value} }}\n"
    assert faults(text) == [f"config.yaml: models.m.{field}: {line}"]


def test_unset_or_empty_api_key_is_fatal_and_passthrough_warns() -> None:
    """Item 18 / C034 (c): an unset or empty { env: VAR } is a boot error naming VAR and the key path."""
    text = ("providers:\n  anthropic: { api_key: { env: EMPTY } }\n  openai: { api_key: { env: K } }\n"
            "models:\n  m: { provider: anthropic }\n")
    assert faults(text, {"K": "sk", "EMPTY": ""}) == [
        "config.yaml: providers.anthropic.api_key: environment variable EMPTY is empty; set EMPTY to the secret"]
    assert faults(text, {"K": "sk"}) == [
        "config.yaml: providers.anthropic.api_key: environment variable EMPTY is not set; export EMPTY (or point "
        "the reference at { file: /path })"]
    loaded = load_config_text(text + "auth: { upstream_credentials: passthrough }\n", {"K": "sk", "EMPTY": "e"})
    assert "config.yaml: providers.openai.api_key: auth.upstream_credentials is passthrough but this credential " \
           "resolves non-empty: a configured key on a passthrough gateway is a credential-leak risk; remove it " \
           "or use own" in loaded.warnings


def test_unreadable_secret_file_is_fatal_and_the_reader_is_injectable(tmp_path: object) -> None:
    text = "providers:\n  anthropic: { api_key: { file: /nonexistent/key } }\nmodels:\n  m: { provider: anthropic }\n"
    assert faults(text) == ["config.yaml: providers.anthropic.api_key: cannot read secret file /nonexistent/key: "
                            "No such file or directory; fix the path or its permissions"]
    loaded = load_config_text(text, ENV, read_file=lambda path: "sk-from-file\n")
    assert loaded.warnings == ["config.yaml: auth.chain: [] is an open front door: no client authentication "
                               "(development only)"]


def test_secret_plugin_reference_needs_plugins() -> None:
    text = ("providers:\n  anthropic: { api_key: { module: vault, settings: { path: kv/anthropic } } }\n"
            "models:\n  m: { provider: anthropic }\n")
    assert faults(text) == ["config.yaml: providers.anthropic.api_key: 'vault' is a kind: secret plugin but "
                            "plugins.enabled is false; set plugins.enabled: true and install its tarball in "
                            "plugins.dir"]
