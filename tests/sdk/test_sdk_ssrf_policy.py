"""busbar_sdk.ssrf.SsrfPolicy verdicts (docs/security.md "SSRF guard"): provider base_url, sidecar /
webhook / OTLP URLs, deny and allow lists, connect-time address checks; case C032 (a), (b)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from busbar_sdk.ssrf import BUILTIN_METADATA_HOSTS, SsrfBlocked, SsrfPolicy

PLAINTEXT = ("base_url uses http:// with a public host: plain HTTP would expose the API key on the wire; "
             "use https://")

# (url, None = allowed | exact reason | "~substring")
PROVIDER = [
    ("https://api.anthropic.com", None),
    ("https://api.anthropic.com/v1/", None),
    ("https://user:secret@api.openai.com/v1", None),
    ("http://127.0.0.1:11434", None),  # local Ollama
    ("http://[::1]:8000/v1", None),
    ("http://localhost:11434", None),
    ("http://vllm.localhost:8000", None),
    ("http://10.0.0.5:8000/v1", None),  # literal private IP: local model
    ("http://192.168.1.20:8080", None),
    ("http://100.64.0.7:8080", None),  # CGNAT (e.g. tailnet)
    ("https://[fd12:3456::1]/v1", None),
    ("http://api.openai.com/v1", PLAINTEXT),
    ("http://8.8.8.8/v1", PLAINTEXT),
    ("http://host.docker.internal:11434", PLAINTEXT),  # DNS name: no DNS classification at config time
    ("http://169.254.169.254/latest/", "base_url: 169.254.169.254 is a cloud-metadata endpoint; refused by "
                                       "the SSRF guard (list it in allow_metadata_hosts only if this is "
                                       "deliberate)"),
    ("https://2852039166/", "~2852039166 (= 169.254.169.254) is a cloud-metadata endpoint"),
    ("https://0xA9FEA9FE/", "~0xa9fea9fe (= 169.254.169.254) is a cloud-metadata endpoint"),
    ("https://0251.0376.0251.0376/", "~0251.0376.0251.0376 (= 169.254.169.254) is a cloud-metadata"),
    ("https://[::ffff:169.254.169.254]/", "~(= 169.254.169.254) is a cloud-metadata endpoint"),
    ("https://metadata.google.internal/computeMetadata/v1/", "~metadata.google.internal is a cloud-metadata"),
    ("https://METADATA.GOOGLE.INTERNAL./", "~is a cloud-metadata endpoint"),
    ("https://100.100.100.200/", "~100.100.100.200 is a cloud-metadata endpoint"),
    ("https://168.63.129.16/", "~168.63.129.16 is a cloud-metadata endpoint"),
    ("https://[fd00:ec2::254]/", "~fd00:ec2::254 is a cloud-metadata endpoint"),
    ("http://[fe80::1]/", "base_url: fe80::1 is a link-local address; refused by the SSRF guard"),
    ("https://0.0.0.0/", "base_url: 0.0.0.0 is the unspecified address (it reaches this host), not a valid "
                         "upstream"),
    ("ftp://api.example.com/", "base_url: unsupported URL scheme ftp://; use https://"),
    ("api.example.com/v1", "~unsupported URL scheme"),
    ("http://evil.example\\@169.254.169.254/", "base_url: URL authority contains a backslash (ambiguous "
                                               "host)"),
    ("http://a@b@169.254.169.254/", "base_url: URL authority contains more than one '@' (ambiguous host)"),
    ("https://api.openai.com /v1", "base_url: URL contains whitespace or control characters"),
    ("https://api.openai.com\n.evil/", "base_url: URL contains whitespace or control characters"),
    ("https://1.2.3.999/", "~invalid"),
    ("https:///v1", "~"),
]

SIDECAR = [  # hook busbar-webrequest settings.url, otlp_url: loopback ok, remote must be https
    ("http://localhost:4318/v1/traces", None),
    ("http://127.0.0.1:9000/hook", None),
    ("http://[::1]:9000/hook", None),
    ("https://logs.example.com/busbar", None),
    ("http://logs.example.com/busbar", "sidecar uses http:// with a non-loopback host (logs.example.com): "
                                       "remote endpoints must use https://"),
    ("https://10.0.0.5/hook", "sidecar: 10.0.0.5 is a private (RFC 1918 / unique-local) address; refused by "
                              "the SSRF guard (only loopback or public https:// endpoints are allowed here)"),
    ("https://172.20.0.3/hook", "~is a private (RFC 1918 / unique-local) address"),
    ("http://192.168.0.2/hook", "~is a private (RFC 1918 / unique-local) address"),
    ("https://100.64.0.1/hook", "~is a carrier-grade NAT (100.64.0.0/10) address"),
    ("https://[fd00::1]/hook", "~is a private (RFC 1918 / unique-local) address"),
    ("https://169.254.10.10/hook", "~is a cloud-metadata endpoint"),
    ("https://[fe80::2]/hook", "~is a link-local address"),
    ("https://255.255.255.255/hook", "~is the broadcast address"),
    ("https://012.0.0.1/hook", "~012.0.0.1 (= 10.0.0.1) is a private"),
]


def _check(policy: SsrfPolicy, url: str, expected: str | None, **kw: object) -> None:
    if expected is None:
        policy.check_url(url, **kw)  # type: ignore[arg-type]
        return
    with pytest.raises(SsrfBlocked) as exc:
        policy.check_url(url, **kw)  # type: ignore[arg-type]
    if expected.startswith("~"):
        assert expected[1:] in exc.value.reason
    else:
        assert exc.value.reason == expected
    assert "\n" not in exc.value.reason and "secret" not in exc.value.reason


@pytest.mark.parametrize("url, expected", PROVIDER, ids=[u for u, _ in PROVIDER])
def test_provider_base_url(url: str, expected: str | None) -> None:
    _check(SsrfPolicy(), url, expected, purpose="base_url", allow_private=True)


@pytest.mark.parametrize("url, expected", SIDECAR, ids=[u for u, _ in SIDECAR])
def test_sidecar_webhook_otlp(url: str, expected: str | None) -> None:
    _check(SsrfPolicy(), url, expected, purpose="sidecar", allow_private=False)


def test_webhook_requires_https_even_on_loopback() -> None:
    with pytest.raises(SsrfBlocked) as exc:
        SsrfPolicy().check_url("http://127.0.0.1:9000/log", purpose="observability.request_log_webhook_url",
                               allow_private=False, require_https=True)
    assert exc.value.reason == ("observability.request_log_webhook_url must use https:// (plain http:// is "
                                "not allowed here)")


def test_require_https_public_false_allows_plaintext_public() -> None:
    SsrfPolicy().check_url("http://api.example.com/", purpose="p", allow_private=True,
                           require_https_public=False)


# --- precedence: blocked iff in (hardcoded ∪ blocked) and not in (global allow ∪ provider allow)
#     and not allow_all_metadata ------------------------------------------------------------------------

def test_blocked_metadata_hosts_extend_the_denylist_with_canonicalization() -> None:
    policy = SsrfPolicy(blocked_metadata_hosts=["Internal-IMDS.Example.", "0x08080808", "9.9.9.0/24"])
    for url in ("https://internal-imds.example/", "https://8.8.8.8/", "https://134744072/",
                "https://9.9.9.9/"):
        with pytest.raises(SsrfBlocked, match="cloud-metadata endpoint"):
            policy.check_url(url, purpose="p", allow_private=True)
    policy.check_url("https://8.8.4.4/", purpose="p", allow_private=True)


def test_global_allow_unblocks_for_every_provider_and_purpose() -> None:
    policy = SsrfPolicy(allow_metadata_hosts=["metadata.google.internal"])
    policy.check_url("http://metadata.google.internal/computeMetadata/v1/", purpose="p", allow_private=True)
    policy.check_url("http://metadata.google.internal/", purpose="p", allow_private=False)
    with pytest.raises(SsrfBlocked):
        policy.check_url("http://169.254.169.254/", purpose="p", allow_private=True)


def test_provider_allow_is_surgical() -> None:
    policy = SsrfPolicy()
    policy.check_url("http://169.254.169.254/latest/", purpose="provider a", allow_private=True,
                     provider_allow=["169.254.169.254"])
    policy.check_url("http://2852039166/latest/", purpose="provider a", allow_private=True,
                     provider_allow=["[::ffff:a9fe:a9fe]"])  # any spelling on either side
    with pytest.raises(SsrfBlocked):
        policy.check_url("http://169.254.169.253/", purpose="provider a", allow_private=True,
                         provider_allow=["169.254.169.254"])
    with pytest.raises(SsrfBlocked):  # another provider without the exception
        policy.check_url("http://169.254.169.254/", purpose="provider b", allow_private=True)


def test_allow_wins_over_blocked() -> None:
    policy = SsrfPolicy(blocked_metadata_hosts=["imds.corp.example"], allow_metadata_hosts=["imds.corp.example"])
    policy.check_url("https://imds.corp.example/", purpose="p", allow_private=True)
    assert not policy.is_metadata("imds.corp.example")


def test_allow_all_metadata_disables_the_denylist() -> None:
    policy = SsrfPolicy(allow_all_metadata=True)
    policy.check_url("http://169.254.169.254/latest/", purpose="p", allow_private=True)
    policy.check_url("http://metadata.google.internal/", purpose="p", allow_private=True)
    assert policy.effective_denylist() == []
    assert policy.startup_warnings() == [
        "security.allow_all_metadata is true: the cloud-metadata SSRF denylist is disabled for every "
        "provider; development use only"]
    assert SsrfPolicy().startup_warnings() == []


def test_allow_list_is_the_exception_for_private_sidecars() -> None:
    SsrfPolicy(allow_metadata_hosts=["10.0.0.5"]).check_url("https://10.0.0.5/hook", purpose="p",
                                                            allow_private=False)


def test_builtin_denylist_contents() -> None:
    for entry in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200",
                  "metadata.google.internal", "metadata.goog", "metadata", "169.254.0.0/16"):
        assert entry in BUILTIN_METADATA_HOSTS
    policy = SsrfPolicy(blocked_metadata_hosts=["imds.example"], allow_metadata_hosts=["metadata.goog"])
    listed = policy.effective_denylist()
    assert "imds.example" in listed and "metadata.goog" not in listed and "metadata" in listed


def test_positional_construction_and_from_config() -> None:
    assert SsrfPolicy(["a.example"], ["b.example"], True).allow_all_metadata is True
    p1 = SsrfPolicy.from_config({"blocked_metadata_hosts": ["x.example"], "allow_all_metadata": None})
    p2 = SsrfPolicy.from_config(SimpleNamespace(blocked_metadata_hosts=["x.example"], allow_metadata_hosts=[],
                                                allow_all_metadata=False))
    for p in (p1, p2):
        assert p.is_metadata("X.Example.")
    assert SsrfPolicy.from_config(None).is_metadata("metadata.goog")


def test_invalid_entries_are_named() -> None:
    with pytest.raises(ValueError) as exc:
        SsrfPolicy(blocked_metadata_hosts=["ok.example", "bad host"], allow_metadata_hosts=["10.0.0.0/40"])
    msg = str(exc.value)
    assert "security.blocked_metadata_hosts: 'bad host'" in msg
    assert "security.allow_metadata_hosts: '10.0.0.0/40'" in msg
    with pytest.raises(SsrfBlocked, match="allow_metadata_hosts: 'no way'"):
        SsrfPolicy().check_url("https://a.example/", purpose="p", allow_private=True, provider_allow=["no way"])


# --- connect-time verdicts (the transport calls these) -------------------------------------------------

@pytest.mark.parametrize("host, addrs, allow_private, expected", [
    ("api.example.com", ["93.184.215.14"], True, None),
    ("api.example.com", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"], True, None),
    ("api.example.com", ["169.254.169.254"], True, "~resolved to 169.254.169.254, a cloud-metadata address"),
    ("api.example.com", ["::ffff:a9fe:a9fe"], True, "~resolved to 169.254.169.254, a cloud-metadata"),
    ("api.example.com", ["64:ff9b::a9fe:a9fe"], True, "~a cloud-metadata address"),
    ("api.example.com", ["10.0.0.5"], True, "~resolved to 10.0.0.5, a private"),
    ("api.example.com", ["127.0.0.1"], True, "~resolved to 127.0.0.1, a loopback address"),
    ("api.example.com", ["100.64.3.3"], False, "~a carrier-grade NAT"),
    ("api.example.com", ["0.0.0.0"], True, "~the unspecified address"),
    ("localhost", ["127.0.0.1", "::1"], False, None),
    ("localhost", ["10.0.0.1"], True, "~a localhost name must resolve to loopback only"),
    ("10.0.0.5", ["10.0.0.5"], True, None),
    ("10.0.0.5", ["10.0.0.5"], False, "~10.0.0.5 is a private"),
    ("metadata.google.internal", ["8.8.8.8"], True, "~metadata.google.internal is a cloud-metadata endpoint"),
])
def test_check_resolved(host: str, addrs: list[str], allow_private: bool, expected: str | None) -> None:
    policy = SsrfPolicy()
    if expected is None:
        assert policy.check_resolved(host, addrs, purpose="p", allow_private=allow_private)
        return
    with pytest.raises(SsrfBlocked) as exc:
        policy.check_resolved(host, addrs, purpose="p", allow_private=allow_private)
    assert expected[1:] in exc.value.reason


def test_check_resolved_allow_list_exempts_name_and_address() -> None:
    policy = SsrfPolicy(allow_metadata_hosts=["metadata.google.internal"])
    assert policy.check_resolved("metadata.google.internal", ["169.254.169.254"], purpose="p",
                                 allow_private=True)
    assert SsrfPolicy().check_resolved("vllm.corp.example", ["10.1.2.3"], purpose="p", allow_private=True,
                                       provider_allow=["vllm.corp.example"])
    assert SsrfPolicy().check_resolved("vllm.corp.example", ["10.1.2.3"], purpose="p", allow_private=True,
                                       provider_allow=["10.0.0.0/8"])
