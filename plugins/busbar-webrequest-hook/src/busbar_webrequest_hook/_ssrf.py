"""The forwarder's SSRF guard: the kernel's rules for hook sidecars, re-implemented plugin-side.

A plugin imports ``busbar_sdk``, never ``busbar``, so this module carries its own copy of the
kernel's ``busbar.security`` verdicts for the ``allow_private=False`` egress class (hook sidecars,
webhooks). ``tests/plugins_firstparty/test_webrequest_ssrf.py`` runs both implementations over the
same table of URLs and resolver answers and requires the same verdicts, so they cannot drift
silently.

The rules (seeds 003 "Webrequest", seeds 001 "Startup validation summary": "Hook busbar-webrequest
SSRF-blocked"; ORIGINAL.md §2.18; handout C032):

=====================  =====================================================================
destination            verdict
=====================  =====================================================================
cloud metadata         refused (169.254.0.0/16, 100.100.100.200, 168.63.129.16, 192.0.0.192,
                       fd00:ec2::254, metadata.google.internal, ... in every spelling)
loopback               allowed, ``http://`` ok (127.0.0.0/8, ::1, ``localhost``, ``*.localhost``)
RFC 1918 / ULA / CGNAT refused
link-local             refused
unspecified, multicast refused
broadcast, reserved
public address / name  ``https://`` required
=====================  =====================================================================

Checked twice: :func:`check_url` when settings are opened or configured, and
:func:`check_resolved` at connect time on every address the host resolves to (DNS rebinding: a
name must resolve to public addresses only; ``localhost`` names to loopback only; a mixed answer
is refused whole). The connection is then made to a checked address literal, never by re-resolving
the name (:class:`GuardedBackend`). ``allow_hosts`` (hosts, IPs, CIDRs) is the one documented
exception, as ``security.allow_metadata_hosts`` is in the kernel: a listed destination may be
private, link-local, metadata or plain ``http://``.

Host canonicalization decodes every spelling the connecting stack would: decimal / hex / octal /
short ``inet_aton`` forms, IPv4-mapped and translated IPv6, percent-encoding, full-width digits and
dots (NFKC), IDNA, case and a trailing dot.
"""
from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import httpcore
import httpx
import idna

__all__ = [
    "BUILTIN_METADATA_HOSTS",
    "RESOLVER",
    "GuardedBackend",
    "HostSet",
    "SsrfBlocked",
    "address_class",
    "canonical_host",
    "check_resolved",
    "check_url",
    "redact_url",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
CanonicalHost = str | ipaddress.IPv4Address | ipaddress.IPv6Address


class SsrfBlocked(Exception):
    """A sidecar URL or a resolved address was refused; ``reason`` is one line, never a credential."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


#: The cloud-metadata denylist (the kernel's ``BUILTIN_METADATA_HOSTS``).
BUILTIN_METADATA_HOSTS: tuple[str, ...] = (
    "169.254.0.0/16", "169.254.169.254", "169.254.170.2", "100.100.100.200", "168.63.129.16",
    "192.0.0.192", "fd00:ec2::254", "fd00:ec2::23", "fe80::a9fe:a9fe", "metadata.google.internal",
    "metadata.goog", "metadata", "metadata.internal", "metadata.tencentyun.com",
    "metadata.platformequinix.com", "instance-data", "instance-data.ec2.internal",
)

# ------------------------------------------------------------------------------ canonicalization

_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_PART = re.compile(r"^(?:0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*)$")
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")
_NAME = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*$")


def canonical_host(host: str) -> CanonicalHost:
    """One comparable form of a host spelling: an ``IPv4Address`` (every IPv4 spelling, IPv4-mapped
    IPv6 included), an ``IPv6Address``, or a lower-case ASCII DNS name without a trailing dot.

    Raises:
        ValueError: not a usable host (empty, forbidden characters, bad percent-encoding or IDNA,
            ends in a number but is no valid IPv4 address).
    """
    s = host.strip()
    if not s:
        raise ValueError("empty host")
    if s.startswith("[") or s.endswith("]"):
        if not (s.startswith("[") and s.endswith("]")):
            raise ValueError(f"unbalanced brackets in host {host!r}")
        return _ipv6(unquote(s[1:-1]), host)
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
    s = s.removesuffix(".")
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
    return ip.ipv4_mapped if ip.ipv4_mapped is not None else ip


def _inet_aton(s: str) -> ipaddress.IPv4Address | None:
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


def _is_localhost_name(name: str) -> bool:
    return name == "localhost" or name.endswith(".localhost")


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
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


_V4_CLASSES: list[tuple[Network, str]] = [
    (ipaddress.IPv4Network("0.0.0.0/8"), "unspecified"),
    (ipaddress.IPv4Network("127.0.0.0/8"), "loopback"),
    (ipaddress.IPv4Network("10.0.0.0/8"), "private"),
    (ipaddress.IPv4Network("172.16.0.0/12"), "private"),
    (ipaddress.IPv4Network("192.168.0.0/16"), "private"),
    (ipaddress.IPv4Network("198.18.0.0/15"), "private"),
    (ipaddress.IPv4Network("100.64.0.0/10"), "cgnat"),
    (ipaddress.IPv4Network("169.254.0.0/16"), "link-local"),
    (ipaddress.IPv4Network("224.0.0.0/4"), "multicast"),
    (ipaddress.IPv4Network("255.255.255.255/32"), "broadcast"),
    (ipaddress.IPv4Network("240.0.0.0/4"), "reserved"),
    (ipaddress.IPv4Network("192.0.0.0/24"), "reserved"),
    (ipaddress.IPv4Network("192.0.2.0/24"), "reserved"),
    (ipaddress.IPv4Network("198.51.100.0/24"), "reserved"),
    (ipaddress.IPv4Network("203.0.113.0/24"), "reserved"),
]
_V6_CLASSES: list[tuple[Network, str]] = [
    (ipaddress.IPv6Network("::/128"), "unspecified"),
    (ipaddress.IPv6Network("::1/128"), "loopback"),
    (ipaddress.IPv6Network("fe80::/10"), "link-local"),
    (ipaddress.IPv6Network("fc00::/7"), "private"),
    (ipaddress.IPv6Network("fec0::/10"), "private"),
    (ipaddress.IPv6Network("64:ff9b:1::/48"), "private"),
    (ipaddress.IPv6Network("ff00::/8"), "multicast"),
    (ipaddress.IPv6Network("2001:db8::/32"), "reserved"),
    (ipaddress.IPv6Network("100::/64"), "reserved"),
]
_NEVER = ("unspecified", "multicast", "broadcast", "reserved")
_CLASS_TEXT = {
    "private": "a private (RFC 1918 / unique-local) address",
    "cgnat": "a carrier-grade NAT (100.64.0.0/10) address",
    "link-local": "a link-local address",
    "loopback": "a loopback address",
    "unspecified": "the unspecified address (it reaches this host)",
    "multicast": "a multicast address",
    "broadcast": "the broadcast address",
    "reserved": "a reserved / non-routable address",
}


def address_class(ip: IPAddress) -> str:
    """``public``, ``loopback``, ``private``, ``cgnat``, ``link-local``, ``unspecified``,
    ``multicast``, ``broadcast`` or ``reserved``; translated IPv6 takes its embedded IPv4's class
    (loopback/unspecified embedded become ``reserved``: only real loopback is loopback)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    table = _V4_CLASSES if isinstance(ip, ipaddress.IPv4Address) else _V6_CLASSES
    for net, cls in table:
        if ip in net:
            return cls
    for inner in _embedded_ipv4(ip):
        cls = address_class(inner)
        if cls != "public":
            return "reserved" if cls in ("loopback", "unspecified") else cls
    return "public"


def _strip_scope(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.scope_id:
            return ipaddress.IPv6Address(int(ip))
    return ip


@dataclass(frozen=True)
class HostSet:
    """Names, addresses and networks, matched in canonical form (the denylist, ``allow_hosts``)."""

    names: frozenset[str]
    ips: frozenset[IPAddress]
    nets: tuple[Network, ...]

    @classmethod
    def parse(cls, entries: Iterable[str], field: str) -> HostSet:
        """Raises ``ValueError`` naming every entry that is no host name, IP address or CIDR."""
        names: set[str] = set()
        ips: set[IPAddress] = set()
        nets: list[Network] = []
        bad: list[str] = []
        for entry in entries:
            text = str(entry).strip()
            try:
                if "/" in text:
                    addr, _, bits = text.partition("/")
                    nets.append(ipaddress.ip_network(f"{addr.strip('[]')}/{bits}", strict=False))
                    continue
                parsed = canonical_host(text)
            except (ValueError, TypeError) as e:
                bad.append(f"{field}: {entry!r} is not a host name, IP address or CIDR ({e})")
                continue
            if isinstance(parsed, str):
                names.add(parsed)
            else:
                ips.add(_strip_scope(parsed))
        if bad:
            raise ValueError("; ".join(bad))
        return cls(frozenset(names), frozenset(ips), tuple(nets))

    def matches(self, host: CanonicalHost) -> bool:
        if isinstance(host, str):
            return host in self.names
        for ip in (_strip_scope(host), *_embedded_ipv4(host)):
            if ip in self.ips or any(ip in net for net in self.nets):
                return True
        return False


_DENY = HostSet.parse(BUILTIN_METADATA_HOSTS, "builtin")
_EMPTY = HostSet(frozenset(), frozenset(), ())


def _shown(raw: str, host: CanonicalHost) -> str:
    canon = str(host)
    return raw if raw.lower().rstrip(".").strip("[]") == canon else f"{raw} (= {canon})"


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` removed (for errors, logs and ``status``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()


# ------------------------------------------------------------------------------ verdicts

def check_url(url: str, *, purpose: str = "settings.url", allow: HostSet = _EMPTY) -> None:
    """Config-time verdict on the sidecar URL (the kernel's ``check_url(..., allow_private=False)``).

    Raises:
        SsrfBlocked: with a one-line reason naming ``purpose`` and the host (never the userinfo).
    """
    if not isinstance(url, str) or not url:
        raise SsrfBlocked(f"{purpose}: empty URL")
    if any(ord(c) <= 0x20 or 0x7F <= ord(c) <= 0x9F for c in url):
        raise SsrfBlocked(f"{purpose}: URL contains whitespace or control characters")
    authority_end = len(url)
    scheme_sep = url.find("://")
    if scheme_sep >= 0:
        rest = url[scheme_sep + 3:]
        for ch in "/?#":
            idx = rest.find(ch)
            if idx >= 0:
                authority_end = min(authority_end, scheme_sep + 3 + idx)
        if "\\" in url[scheme_sep + 3:authority_end]:
            raise SsrfBlocked(f"{purpose}: URL authority contains a backslash (ambiguous host)")
    try:
        netloc = urlsplit(url).netloc
    except ValueError as e:
        raise SsrfBlocked(f"{purpose}: invalid URL: {e}") from None
    if netloc.count("@") > 1:
        raise SsrfBlocked(f"{purpose}: URL authority contains more than one '@' (ambiguous host)")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as e:
        raw_host = netloc.rpartition("@")[2]
        if raw_host.startswith("["):
            raw_host = raw_host[: raw_host.find("]") + 1]
        elif ":" in raw_host:
            raw_host = raw_host.rpartition(":")[0]
        scheme = url[:scheme_sep].lower() if scheme_sep > 0 else ""
        if raw_host:
            try:
                check_host(scheme, raw_host, purpose=purpose, allow=allow)
            except SsrfBlocked as blocked:
                if "invalid host" not in blocked.reason:
                    raise blocked from None
        raise SsrfBlocked(f"{purpose}: invalid URL: {e}") from None
    check_host(parsed.scheme, parsed.host, purpose=purpose, allow=allow)


def check_host(scheme: str, host: str, *, purpose: str = "settings.url", allow: HostSet = _EMPTY) -> None:
    """:func:`check_url` for an already split URL (``scheme`` lower-case, ``host`` as httpx gives it)."""
    if scheme not in ("http", "https"):
        raise SsrfBlocked(f"{purpose}: unsupported URL scheme {scheme + '://' if scheme else '(none)'}; "
                          f"use https://")
    if not host:
        raise SsrfBlocked(f"{purpose}: URL has no host")
    try:
        h = canonical_host(host)
    except ValueError as e:
        raise SsrfBlocked(f"{purpose}: invalid host: {e}") from None
    shown = _shown(host, h)
    allowed = allow.matches(h)
    if _DENY.matches(h) and not allowed:
        raise SsrfBlocked(f"{purpose}: {shown} is a cloud-metadata endpoint; refused by the SSRF "
                          f"guard (list it in allow_hosts only if this is deliberate)")
    cls = ("loopback" if _is_localhost_name(h) else "name") if isinstance(h, str) else address_class(h)
    if cls in _NEVER:
        raise SsrfBlocked(f"{purpose}: {shown} is {_CLASS_TEXT[cls]}, not a valid upstream")
    if not allowed and cls in ("link-local", "private", "cgnat"):
        raise SsrfBlocked(f"{purpose}: {shown} is {_CLASS_TEXT[cls]}; refused by the SSRF guard "
                          f"(only loopback or public https:// endpoints are allowed here)")
    if scheme == "http" and not allowed and cls != "loopback":
        raise SsrfBlocked(f"{purpose} uses http:// with a non-loopback host ({shown}): remote endpoints "
                          f"must use https://")


def check_resolved(host: str, addresses: Iterable[str | IPAddress], *, purpose: str = "settings.url",
                   allow: HostSet = _EMPTY) -> list[IPAddress]:
    """Connect-time verdict: every address ``host`` resolved to must pass, else the host is refused.

    Returns:
        the checked addresses in resolver order, duplicates removed: connect to these, never
        re-resolve the name.

    Raises:
        SsrfBlocked: one address is refused (a mixed answer is refused whole).
    """
    try:
        h = canonical_host(host)
    except ValueError as e:
        raise SsrfBlocked(f"{purpose}: invalid host: {e}") from None
    name_allowed = allow.matches(h)
    if _DENY.matches(h) and not name_allowed:
        raise SsrfBlocked(f"{purpose}: {_shown(host, h)} is a cloud-metadata endpoint; refused by the "
                          f"SSRF guard")
    out: list[IPAddress] = []
    for raw in addresses:
        try:
            ip = raw if not isinstance(raw, str) else ipaddress.ip_address(raw)
        except ValueError:
            raise SsrfBlocked(f"{purpose}: {host} resolved to {raw!r}, which is not an IP address") from None
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip in out:
            continue
        allowed = name_allowed or allow.matches(ip)
        where = f"{host} resolved to {ip}" if isinstance(h, str) else f"{host}"
        if _DENY.matches(ip) and not allowed:
            raise SsrfBlocked(f"{purpose}: {where}, a cloud-metadata address; refused at connect time "
                              f"by the SSRF guard")
        cls = address_class(ip)
        if cls in _NEVER:
            raise SsrfBlocked(f"{purpose}: {where}, {_CLASS_TEXT[cls]}; refused at connect time")
        if not allowed:
            if isinstance(h, str):
                ok = cls == "loopback" if _is_localhost_name(h) else cls == "public"
                if not ok:
                    raise SsrfBlocked(
                        f"{purpose}: {where}, {_CLASS_TEXT.get(cls, 'a public address')}; refused at "
                        f"connect time (DNS rebinding guard: "
                        + ("a localhost name must resolve to loopback only)" if _is_localhost_name(h)
                           else "a DNS name must resolve to public addresses unless it is listed in "
                                "allow_hosts)"))
            elif cls in ("link-local", "private", "cgnat"):
                raise SsrfBlocked(f"{purpose}: {where} is {_CLASS_TEXT[cls]}; refused at connect time")
        out.append(ip)
    return out


# ------------------------------------------------------------------------------ connect time

def system_resolver(host: str, port: int) -> list[str]:
    """The default resolver: ``getaddrinfo``; addresses in preference order, deduplicated."""
    out: list[str] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        addr = str(sockaddr[0])
        if addr not in out:
            out.append(addr)
    return out


#: ``(host, port) -> addresses``, looked up at connect time (tests replace it; no network needed).
RESOLVER: Callable[[str, int], Sequence[str | IPAddress]] = system_resolver


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore (sync) network backend: resolve, check every address, connect to a checked literal.

    TLS is unaffected: httpcore sends SNI and verifies the certificate against the URL's host name,
    not the address connected to. It runs only when the keep-alive pool opens a new connection.
    """

    def __init__(self, inner: httpcore.NetworkBackend, allow: HostSet, purpose: str = "settings.url") -> None:
        self._inner = inner
        self._allow = allow
        self._purpose = purpose

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            canon = canonical_host(host)
        except ValueError as e:
            raise SsrfBlocked(f"{self._purpose}: invalid host: {e}") from None
        if isinstance(canon, str):
            try:
                addresses = RESOLVER(canon, port)
            except OSError as e:
                raise httpcore.ConnectError(f"cannot resolve {host}: {e}") from None
        else:
            addresses = [canon]
        checked = check_resolved(host, addresses, purpose=self._purpose, allow=self._allow)
        if not checked:
            raise httpcore.ConnectError(f"{host} resolved to no addresses")
        last: Exception = httpcore.ConnectError(f"cannot connect to {host}")
        for ip in checked:
            try:
                return self._inner.connect_tcp(str(ip), port, timeout=timeout, local_address=local_address,
                                               socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                last = e
        raise last

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise SsrfBlocked("unix-socket connections are not allowed through the SSRF guard")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
