"""busbar_sdk.ssrf: host canonicalization (obfuscation-aware) and address classes (docs/security.md)."""
from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address as V4
from ipaddress import IPv6Address as V6

import pytest
from busbar_sdk.ssrf import SsrfBlocked, SsrfPolicy, address_class, canonical_host, parse_host_or_network
from hypothesis import given
from hypothesis import strategies as st

IMDS = V4("169.254.169.254")

# (spelling, canonical form, verdict for a provider base_url https://<spelling>/ under the default policy)
SPELLINGS = [
    ("169.254.169.254", IMDS, "metadata"),
    ("2852039166", IMDS, "metadata"),  # decimal integer
    ("0xA9FEA9FE", IMDS, "metadata"),  # hex integer
    ("0xa9fea9fe", IMDS, "metadata"),
    ("0251.0376.0251.0376", IMDS, "metadata"),  # octal dotted
    ("0xa9.0xfe.0xa9.0xfe", IMDS, "metadata"),  # hex dotted
    ("169.254.43518", IMDS, "metadata"),  # short form: last part fills 16 bits
    ("169.16689662", IMDS, "metadata"),  # short form: last part fills 24 bits
    ("0251.0xfe.43518", IMDS, "metadata"),  # mixed radixes
    ("169.254.169.254.", IMDS, "metadata"),  # trailing dot
    ("[::ffff:169.254.169.254]", IMDS, "metadata"),  # IPv4-mapped IPv6
    ("::ffff:a9fe:a9fe", IMDS, "metadata"),  # IPv4-mapped, hex groups, unbracketed
    ("[::FFFF:A9FE:A9FE]", IMDS, "metadata"),
    ("%31%36%39.254.169.254", IMDS, "metadata"),  # percent-encoded
    ("%2531%2536%2539.254.169.254", IMDS, "metadata"),  # double percent-encoded
    ("\uff11\uff16\uff19\u3002\uff12\uff15\uff14\u3002\uff11\uff16\uff19\u3002\uff12\uff15\uff14",
     IMDS, "metadata"),  # full-width digits and ideographic full stops (IDNA mapping)
    ("169.254.170.2", V4("169.254.170.2"), "metadata"),  # ECS task metadata
    ("100.100.100.200", V4("100.100.100.200"), "metadata"),  # Alibaba
    ("1684301000", V4("100.100.100.200"), "metadata"),
    ("[fd00:ec2::254]", V6("fd00:ec2::254"), "metadata"),  # AWS IMDS IPv6
    ("[FD00:0EC2:0000:0000:0000:0000:0000:0254]", V6("fd00:ec2::254"), "metadata"),
    ("[64:ff9b::a9fe:a9fe]", V6("64:ff9b::a9fe:a9fe"), "metadata"),  # NAT64 of IMDS
    ("[2002:a9fe:a9fe::]", V6("2002:a9fe:a9fe::"), "metadata"),  # 6to4 of IMDS
    ("169.254.1.1", V4("169.254.1.1"), "metadata"),  # all of 169.254.0.0/16
    ("Metadata.Google.Internal", "metadata.google.internal", "metadata"),
    ("metadata.google.internal.", "metadata.google.internal", "metadata"),
    ("METADATA.GOOG", "metadata.goog", "metadata"),
    ("metadata", "metadata", "metadata"),
    ("instance-data.ec2.internal", "instance-data.ec2.internal", "metadata"),
    ("ｍｅｔａｄａｔａ.google.internal", "metadata.google.internal", "metadata"),  # full-width letters
    ("127.0.0.1", V4("127.0.0.1"), "ok"),
    ("127.1", V4("127.0.0.1"), "ok"),
    ("0x7f000001", V4("127.0.0.1"), "ok"),
    ("[::1]", V6("::1"), "ok"),
    ("10.0.0.5", V4("10.0.0.5"), "ok"),  # private: allowed for provider upstreams
    ("100.64.1.1", V4("100.64.1.1"), "ok"),  # CGNAT: allowed for provider upstreams
    ("API.Anthropic.com.", "api.anthropic.com", "ok"),
    ("bücher.de", "xn--bcher-kva.de", "ok"),
    ("1.2.3.example", "1.2.3.example", "ok"),  # a name: the last label is not numeric
    ("[fe80::1%25eth0]", V6("fe80::1%eth0"), "link-local"),
    ("0.0.0.0", V4("0.0.0.0"), "unspecified"),
    ("0", V4("0.0.0.0"), "unspecified"),
    ("[::]", V6("::"), "unspecified"),
    ("255.255.255.255", V4("255.255.255.255"), "broadcast"),
    ("224.0.0.1", V4("224.0.0.1"), "multicast"),
]


@pytest.mark.parametrize("spelling, canonical, verdict", SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_canonical_host_table(spelling: str, canonical: object, verdict: str) -> None:
    assert canonical_host(spelling) == canonical
    host = spelling if spelling.startswith("[") or ":" not in spelling else f"[{spelling}]"
    policy = SsrfPolicy()
    if verdict == "ok":
        policy.check_url(f"https://{host}/v1", purpose="base_url", allow_private=True)
        return
    with pytest.raises(SsrfBlocked) as exc:
        policy.check_url(f"https://{host}/v1", purpose="base_url", allow_private=True)
    expected = {"metadata": "is a cloud-metadata endpoint", "link-local": "is a link-local address",
                "unspecified": "is the unspecified address", "broadcast": "is the broadcast address",
                "multicast": "is a multicast address"}[verdict]
    assert expected in exc.value.reason


def test_table_is_large_enough() -> None:
    assert len(SPELLINGS) >= 20


@pytest.mark.parametrize("bad", [
    "", " ", "1.2.3.999", "1.2.3.4.5", "0x1.0x100.1.1", "08.1.1.1", "256.256.256.256", "4294967296",
    "[::1", "exa mple.com", "a/b", "a\\b", "user@host", "host:80", "%zz", "a..b", ".a",
], ids=repr)
def test_unusable_hosts_raise(bad: str) -> None:
    with pytest.raises(ValueError):
        canonical_host(bad)


@pytest.mark.parametrize("ip, cls", [
    ("8.8.8.8", "public"), ("127.0.0.1", "loopback"), ("127.255.0.1", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"),
    ("172.32.0.1", "public"), ("192.168.1.1", "private"), ("fd12::1", "private"),
    ("100.64.0.1", "cgnat"), ("100.127.255.255", "cgnat"), ("100.128.0.1", "public"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("0.0.0.0", "unspecified"),
    ("::", "unspecified"), ("224.0.0.251", "multicast"), ("ff02::1", "multicast"),
    ("255.255.255.255", "broadcast"), ("240.0.0.1", "reserved"), ("192.0.2.1", "reserved"),
    ("2001:db8::1", "reserved"), ("64:ff9b::a00:5", "private"), ("64:ff9b::7f00:1", "reserved"),
    ("64:ff9b::808:808", "public"), ("2606:4700::1111", "public"), ("::ffff:10.0.0.1", "private"),
])
def test_address_class(ip: str, cls: str) -> None:
    assert address_class(ipaddress.ip_address(ip)) == cls


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_ipv4_spelling_folds_to_the_same_address(value: int) -> None:
    ip = V4(value)
    b = ip.packed
    spellings = [
        str(value), hex(value), "0" + oct(value)[2:] if value else "0",
        ".".join(str(x) for x in b), ".".join(hex(x) for x in b), ".".join("0" + oct(x)[2:] for x in b),
        f"{b[0]}.{b[1]}.{(b[2] << 8) | b[3]}", f"{b[0]}.{(b[1] << 16) | (b[2] << 8) | b[3]}",
        f"[::ffff:{ip}]", f"::ffff:{(value >> 16):x}:{(value & 0xffff):x}", f"{ip}.",
    ]
    for s in spellings:
        assert canonical_host(s) == ip, s


def test_entries_accept_cidrs() -> None:
    assert parse_host_or_network("169.254.0.0/16") == ipaddress.ip_network("169.254.0.0/16")
    assert parse_host_or_network("[fd00:ec2::]/64") == ipaddress.ip_network("fd00:ec2::/64")
    with pytest.raises(ValueError):
        parse_host_or_network("10.0.0.0/33")
