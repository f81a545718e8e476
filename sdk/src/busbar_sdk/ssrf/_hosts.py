"""Host canonicalization and address classes for the SSRF guard.

What lives here: the pure functions that turn any spelling of a host into ONE comparable form
(:func:`canonical_host`) and put an IP address into ONE class (:func:`address_class`). No policy, no
I/O, no DNS: the verdicts are :mod:`busbar_sdk.ssrf._policy`; connect-time resolution belongs to each
HTTP client (the kernel's aiohttp connector, the webrequest forwarder's backends).

Canonicalization mirrors what the connecting stack (httpx -> httpcore -> ``getaddrinfo``) and the WHATWG
URL parser would do with the same string, erring on the side of *decoding more*, so an obfuscated
spelling can never slip past a denylist comparison:

==============================  ============================================
spelling                        canonical form
==============================  ============================================
``2852039166``                  ``IPv4Address('169.254.169.254')``
``0xA9FEA9FE``                  ``IPv4Address('169.254.169.254')``
``0251.0376.0251.0376``         ``IPv4Address('169.254.169.254')``
``169.254.43518``, ``0xa9.16689662``  ``IPv4Address('169.254.169.254')`` (inet_aton short forms)
``[::ffff:169.254.169.254]``    ``IPv4Address('169.254.169.254')`` (IPv4-mapped IPv6)
``[::ffff:a9fe:a9fe]``          ``IPv4Address('169.254.169.254')``
``Metadata.Google.Internal.``   ``'metadata.google.internal'`` (case folded, trailing dot)
``%31%36%39.254.169.254``       ``IPv4Address('169.254.169.254')`` (percent-decoded)
``１６９。２５４。１６９。２５４``  ``IPv4Address('169.254.169.254')`` (NFKC / IDNA full-width mapping)
``bücher.de``                   ``'xn--bcher-kva.de'`` (IDNA A-label)
==============================  ============================================

See docs/security.md "SSRF guard" (obfuscation-aware canonicalization).
"""
from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Union
from urllib.parse import unquote

import idna

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
CanonicalHost = Union[str, ipaddress.IPv4Address, ipaddress.IPv6Address]

__all__ = [
    "CanonicalHost",
    "IPAddress",
    "Network",
    "address_class",
    "canonical_host",
    "embedded_ipv4",
    "is_localhost_name",
    "parse_host_or_network",
]

# Dots that IDNA (UTS #46) maps to U+002E.
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
# One inet_aton part: hex (0x may have no digits: WHATWG reads it as 0), octal (leading 0), decimal.
_PART = re.compile(r"^(?:0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*)$")
# WHATWG "ends in a number": the last label is all digits or 0x-hex, so the host MUST be IPv4.
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")
_NAME = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*$")


def canonical_host(host: str) -> CanonicalHost:
    """Canonicalize one host spelling so equal destinations compare equal.

    Args:
        host: a URL host as written (``"0xA9FEA9FE"``, ``"[::1]"``, ``"Metadata.Google.Internal."``),
            without port or userinfo. Brackets around IPv6 literals are optional.

    Returns:
        ``ipaddress.IPv4Address`` for every IPv4 spelling (including IPv4-mapped IPv6, which connects to
        the IPv4 address), ``ipaddress.IPv6Address`` for other IPv6 literals (a zone id is kept), or a
        lower-case ASCII DNS name (IDNA A-labels, no trailing dot) for everything else.

    Raises:
        ValueError: the string is not a usable host: empty, contains characters no host can carry
            (``/ \\ @ :`` outside an IPv6 literal, whitespace, controls), invalid percent-encoding or
            IDNA, or it ends in a number (``1.2.3.999``) but is not a valid IPv4 address. The guard
            treats all of these as refusals, never as "no match".

    """
    if not isinstance(host, str):
        raise TypeError(f"host must be str, not {type(host).__name__}")
    s = host.strip()
    if not s:
        raise ValueError("empty host")
    if s.startswith("[") or s.endswith("]"):
        if not (s.startswith("[") and s.endswith("]")):
            raise ValueError(f"unbalanced brackets in host {host!r}")
        return _ipv6(unquote(s[1:-1]), host)
    # Undo percent-encoding until stable (a decoder further down the line may decode again).
    for _ in range(4):
        try:
            decoded = unquote(s, errors="strict")
        except UnicodeDecodeError:
            raise ValueError(f"invalid percent-encoding in host {host!r}") from None
        if decoded == s:
            break
        s = decoded
    if "%" in s and ":" not in s:
        raise ValueError(f"invalid percent-encoding in host {host!r}")
    s = unicodedata.normalize("NFKC", s).translate(_DOTS).lower()
    if ":" in s:
        return _ipv6(s, host)
    if s.endswith("."):
        s = s[:-1]
    if not s or ".." in s or s.startswith("."):
        raise ValueError(f"empty label in host {host!r}")
    v4 = _inet_aton(s)
    if v4 is not None:
        return v4
    if _NUMERIC_LABEL.match(s.rsplit(".", 1)[-1]):
        raise ValueError(f"host {host!r} ends in a number but is not a valid IPv4 address")
    if not s.isascii():
        try:
            s = idna.encode(s, uts46=True, transitional=False).decode("ascii").lower()
        except (idna.IDNAError, UnicodeError) as e:
            raise ValueError(f"invalid internationalized host {host!r}: {e}") from None
    if not _NAME.match(s) or len(s) > 253:
        raise ValueError(f"invalid host {host!r}")
    return s


def _ipv6(s: str, original: str) -> IPAddress:
    try:
        ip = ipaddress.IPv6Address(s)
    except ValueError:
        raise ValueError(f"invalid IPv6 literal {original!r}") from None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _inet_aton(s: str) -> ipaddress.IPv4Address | None:
    """BSD/glibc ``inet_aton`` (and WHATWG IPv4 parser) semantics: 1-4 parts, the last fills the rest."""
    parts = s.split(".")
    if not 1 <= len(parts) <= 4 or not all(_PART.match(p) for p in parts):
        return None
    nums = []
    for p in parts:
        if p.startswith("0x"):
            nums.append(int(p[2:] or "0", 16))
        elif len(p) > 1 and p.startswith("0"):
            nums.append(int(p, 8))
        else:
            nums.append(int(p))
    head, last = nums[:-1], nums[-1]
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(nums)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def is_localhost_name(name: str) -> bool:
    """``localhost`` and ``*.localhost`` (RFC 6761 §6.3): names that must resolve to loopback only."""
    return name == "localhost" or name.endswith(".localhost")


def parse_host_or_network(entry: str) -> CanonicalHost | Network:
    """Parse one ``blocked_metadata_hosts`` / ``allow_metadata_hosts`` entry.

    Args:
        entry: an IP literal in any spelling :func:`canonical_host` accepts, a DNS name, or a CIDR
            (``"169.254.0.0/16"``, ``"fd00:ec2::/64"``).

    Returns:
        a canonical host, or an ``ip_network`` for a CIDR.

    Raises:
        ValueError: the entry is neither.
    """
    text = entry.strip()
    if "/" in text:
        addr, _, bits = text.partition("/")
        try:
            return ipaddress.ip_network(f"{addr.strip('[]')}/{bits}", strict=False)
        except ValueError:
            raise ValueError(f"invalid network {entry!r}") from None
    return canonical_host(text)


def embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address reaches through a translation mechanism.

    IPv4-compatible (``::a.b.c.d``), NAT64 well-known prefix (``64:ff9b::/96``, RFC 6052), 6to4
    (``2002::/16``) and Teredo (server and de-obfuscated client). IPv4-mapped addresses are already
    folded to IPv4 by :func:`canonical_host`; they are handled here too for raw resolver output.
    """
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    out: list[ipaddress.IPv4Address] = []
    value = int(ip)
    if ip.ipv4_mapped is not None:
        out.append(ip.ipv4_mapped)
    if value >> 32 == 0 and value > 1:
        out.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if ip in _NAT64:
        out.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        out.append(ip.sixtofour)
    if ip.teredo is not None:
        out.extend(ip.teredo)
    return out


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

# Ordered: first match wins. Everything unmatched is "public".
_V4_CLASSES: list[tuple[Network, str]] = [
    (ipaddress.IPv4Network("0.0.0.0/8"), "unspecified"),
    (ipaddress.IPv4Network("127.0.0.0/8"), "loopback"),
    (ipaddress.IPv4Network("10.0.0.0/8"), "private"),
    (ipaddress.IPv4Network("172.16.0.0/12"), "private"),
    (ipaddress.IPv4Network("192.168.0.0/16"), "private"),
    (ipaddress.IPv4Network("198.18.0.0/15"), "private"),  # benchmarking; also fake-IP DNS proxies
    (ipaddress.IPv4Network("100.64.0.0/10"), "cgnat"),
    (ipaddress.IPv4Network("169.254.0.0/16"), "link-local"),
    (ipaddress.IPv4Network("224.0.0.0/4"), "multicast"),
    (ipaddress.IPv4Network("255.255.255.255/32"), "broadcast"),
    (ipaddress.IPv4Network("240.0.0.0/4"), "reserved"),
    (ipaddress.IPv4Network("192.0.0.0/24"), "reserved"),  # IETF protocol assignments
    (ipaddress.IPv4Network("192.0.2.0/24"), "reserved"),  # documentation
    (ipaddress.IPv4Network("198.51.100.0/24"), "reserved"),
    (ipaddress.IPv4Network("203.0.113.0/24"), "reserved"),
]
_V6_CLASSES: list[tuple[Network, str]] = [
    (ipaddress.IPv6Network("::/128"), "unspecified"),
    (ipaddress.IPv6Network("::1/128"), "loopback"),
    (ipaddress.IPv6Network("fe80::/10"), "link-local"),
    (ipaddress.IPv6Network("fc00::/7"), "private"),  # unique local (ULA)
    (ipaddress.IPv6Network("fec0::/10"), "private"),  # deprecated site-local
    (ipaddress.IPv6Network("64:ff9b:1::/48"), "private"),  # local-use NAT64
    (ipaddress.IPv6Network("ff00::/8"), "multicast"),
    (ipaddress.IPv6Network("2001:db8::/32"), "reserved"),
    (ipaddress.IPv6Network("100::/64"), "reserved"),  # discard-only
]

#: Every value :func:`address_class` can return.
ADDRESS_CLASSES = ("public", "loopback", "private", "cgnat", "link-local", "unspecified", "multicast",
                   "broadcast", "reserved")


def address_class(ip: IPAddress) -> str:
    """Classify one address for the SSRF guard.

    Returns:
        one of ``public``, ``loopback``, ``private`` (RFC 1918, ULA, site-local, 198.18/15),
        ``cgnat`` (100.64/10), ``link-local`` (169.254/16, fe80::/10), ``unspecified`` (0.0.0.0/8, ::),
        ``multicast``, ``broadcast``, ``reserved`` (documentation, 240/4, ...). An IPv6 address that
        embeds a non-public IPv4 address (NAT64, 6to4, IPv4-compatible) takes that address's class,
        except loopback, which becomes ``reserved``: only a real loopback address is loopback.
    """
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    table = _V4_CLASSES if isinstance(ip, ipaddress.IPv4Address) else _V6_CLASSES
    for net, cls in table:
        if ip in net:
            return cls
    for inner in embedded_ipv4(ip):
        cls = address_class(inner)
        if cls != "public":
            return "reserved" if cls in ("loopback", "unspecified") else cls
    return "public"
