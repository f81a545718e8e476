"""The SSRF policy: the metadata denylist, :class:`SsrfPolicy` and :class:`SsrfBlocked`.

What lives here: config-time URL verdicts (:meth:`SsrfPolicy.check_url`) and connect-time address
verdicts (:meth:`SsrfPolicy.check_resolved`). No I/O, no DNS, no HTTP client: the clients that call
``check_resolved`` live with their transports; import the public API from :mod:`busbar_sdk.ssrf`.
See docs/security.md "SSRF guard".
"""
from __future__ import annotations

import copy
import functools
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from busbar_sdk.ssrf._hosts import (
    CanonicalHost,
    IPAddress,
    Network,
    address_class,
    canonical_host,
    embedded_ipv4,
    is_localhost_name,
    parse_host_or_network,
)

__all__ = ["BUILTIN_METADATA_HOSTS", "SsrfBlocked", "SsrfPolicy"]

#: The hardcoded cloud-metadata denylist (docs/security.md). IP entries and
#: CIDRs match every spelling :func:`canonical_host` folds onto them; names match case-insensitively
#: with or without a trailing dot.
BUILTIN_METADATA_HOSTS: tuple[str, ...] = (
    "169.254.0.0/16",  # link-local v4: AWS/GCP/Azure/OpenStack/DO IMDS 169.254.169.254, ECS 169.254.170.2
    "169.254.169.254",
    "169.254.170.2",
    "100.100.100.200",  # Alibaba Cloud
    "168.63.129.16",  # Azure WireServer
    "192.0.0.192",  # Oracle Cloud
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "fd00:ec2::23",  # AWS EKS Pod Identity over IPv6
    "fe80::a9fe:a9fe",  # OpenStack IMDS over IPv6
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "metadata.internal",
    "metadata.tencentyun.com",
    "metadata.platformequinix.com",
    "instance-data",
    "instance-data.ec2.internal",
)

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


class SsrfBlocked(Exception):
    """An egress URL or a resolved address was refused by the SSRF guard.

    Attributes:
        reason: one line naming the purpose, the host and why, e.g.
            ``provider openai: 169.254.43518 (= 169.254.169.254) is a cloud-metadata endpoint; ...``.
            Never contains a credential (userinfo is not echoed).
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def _strip_scope(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.scope_id:
            return ipaddress.IPv6Address(int(ip))
    return ip


@dataclass(frozen=True)
class _HostSet:
    names: frozenset[str]
    ips: frozenset[IPAddress]
    nets: tuple[Network, ...]

    @classmethod
    def parse(cls, entries: Iterable[str], field: str) -> _HostSet:
        names: set[str] = set()
        ips: set[IPAddress] = set()
        nets: list[Network] = []
        bad: list[str] = []
        for entry in entries:
            try:
                parsed = parse_host_or_network(str(entry))
            except (ValueError, TypeError) as e:
                bad.append(f"{field}: {entry!r} is not a host name, IP address or CIDR ({e})")
                continue
            if isinstance(parsed, str):
                names.add(parsed)
            elif isinstance(parsed, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
                nets.append(parsed)
            else:
                ips.add(_strip_scope(parsed))
        if bad:
            raise ValueError("; ".join(bad))
        return cls(frozenset(names), frozenset(ips), tuple(nets))

    def matches(self, host: CanonicalHost) -> bool:
        if isinstance(host, str):
            return host in self.names
        for ip in (_strip_scope(host), *embedded_ipv4(host)):
            if ip in self.ips or any(ip in net for net in self.nets):
                return True
        return False

    def __or__(self, other: _HostSet) -> _HostSet:
        return _HostSet(self.names | other.names, self.ips | other.ips, self.nets + other.nets)


_EMPTY = _HostSet(frozenset(), frozenset(), ())


@functools.lru_cache(maxsize=256)
def _provider_set(entries: tuple[str, ...], field: str) -> _HostSet:
    return _HostSet.parse(entries, field) if entries else _EMPTY


def _shown(raw: str, host: CanonicalHost) -> str:
    canon = str(host)
    return raw if raw.lower().rstrip(".").strip("[]") == canon else f"{raw} (= {canon})"


class SsrfPolicy:
    """The effective SSRF policy built from the config's ``security`` block.

    Args:
        blocked_metadata_hosts: ``security.blocked_metadata_hosts``: extra hosts, IPs or CIDRs appended
            to :data:`BUILTIN_METADATA_HOSTS` (same canonicalization).
        allow_metadata_hosts: ``security.allow_metadata_hosts``: hosts, IPs or CIDRs unblocked for every
            egress path.
        allow_all_metadata: ``security.allow_all_metadata``: lifts the metadata denylist entirely
            (development only; :meth:`startup_warnings` reports it).
        allow_key: the name of the caller's own allow-list key, used in refusal hints and in
            the error for a bad ``provider_allow`` entry (``allow_metadata_hosts`` for the kernel's
            providers, ``allow_hosts`` for the webrequest forwarder's ``settings``).

    Raises:
        ValueError: an entry is neither a host name, an IP literal nor a CIDR (every bad entry named).

    Precedence (docs/security.md): a host is blocked iff it is in (hardcoded ∪ blocked_metadata_hosts)
    and not in (security.allow_metadata_hosts ∪ the provider's allow_metadata_hosts) and not
    allow_all_metadata. Allow always wins. An allow-list entry is also the one documented exception to the
    address-class rules below: a listed host may be private, link-local or use http://.

    Address classes, by ``allow_private``:

    ==================  =========================================  =========================================
    class               ``allow_private=True`` (provider base_url,  ``allow_private=False`` (hook sidecars,
                        token_url, health probes)                   webhooks, OTLP)
    ==================  =========================================  =========================================
    metadata            refused                                     refused
    loopback            allowed, http:// ok                         allowed, http:// ok
    private / CGNAT     allowed when a literal IP, http:// ok       refused
    link-local          refused                                     refused
    public              https:// required                           https:// required
    DNS name            https:// required (``localhost``: http ok)  https:// required (``localhost``: http ok)
    unspecified,        refused                                     refused
    multicast, ...
    ==================  =========================================  =========================================

    At connect time a DNS name must resolve to public addresses only (``localhost`` / ``*.localhost`` to
    loopback only); a name that resolves into loopback, private, CGNAT or link-local space is DNS
    rebinding and is refused unless the name or the address is allow-listed.
    """

    def __init__(self, blocked_metadata_hosts: Iterable[str] = (),
                 allow_metadata_hosts: Iterable[str] = (), allow_all_metadata: bool = False,
                 allow_key: str = "allow_metadata_hosts"):
        self.allow_key = allow_key
        self.blocked_metadata_hosts = _as_tuple(blocked_metadata_hosts)
        self.allow_metadata_hosts = _as_tuple(allow_metadata_hosts)
        self.allow_all_metadata = bool(allow_all_metadata)
        faults = []
        try:
            self._deny = _HostSet.parse(BUILTIN_METADATA_HOSTS, "builtin") | _HostSet.parse(
                self.blocked_metadata_hosts, "security.blocked_metadata_hosts")
        except ValueError as e:
            faults.append(str(e))
        try:
            self._allow = _HostSet.parse(self.allow_metadata_hosts, "security.allow_metadata_hosts")
        except ValueError as e:
            faults.append(str(e))
        if faults:
            raise ValueError("; ".join(faults))

    @classmethod
    def from_config(cls, security: Any | None) -> SsrfPolicy:
        """Build from the parsed ``security`` block: a mapping, a model with those attributes, or None."""
        if security is None:
            return cls()

        def get(key: str, default: Any) -> Any:
            if isinstance(security, Mapping):
                value = security.get(key, default)
            else:
                value = getattr(security, key, default)
            return default if value is None else value

        return cls(get("blocked_metadata_hosts", ()), get("allow_metadata_hosts", ()),
                   get("allow_all_metadata", False))

    def with_allow_key(self, allow_key: str) -> SsrfPolicy:
        """The same policy (same parsed lists) naming ``allow_key`` in its refusal hints: for a caller
        whose own allow-list has another name (a plugin's ``settings.allow_hosts``)."""
        other = copy.copy(self)
        other.allow_key = allow_key
        return other

    def __repr__(self) -> str:
        return (f"SsrfPolicy(blocked_metadata_hosts={self.blocked_metadata_hosts!r}, "
                f"allow_metadata_hosts={self.allow_metadata_hosts!r}, "
                f"allow_all_metadata={self.allow_all_metadata!r})")

    def startup_warnings(self) -> list[str]:
        """One line per unsafe switch, for the boot log (``allow_all_metadata`` warns)."""
        if self.allow_all_metadata:
            return ["security.allow_all_metadata is true: the cloud-metadata SSRF denylist is disabled "
                    "for every provider; development use only"]
        return []

    def effective_denylist(self) -> list[str]:
        """The effective denylist, one entry per line (``--print-metadata-blocklist``)."""
        if self.allow_all_metadata:
            return []
        out = [*BUILTIN_METADATA_HOSTS, *self.blocked_metadata_hosts]
        return [e for e in dict.fromkeys(out) if not self._allowed_entry(e)]

    def _allowed_entry(self, entry: str) -> bool:
        try:
            parsed = parse_host_or_network(entry)
        except ValueError:
            return False
        if isinstance(parsed, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
            return parsed in self._allow.nets
        return self._allow.matches(parsed)

    # --- verdicts -------------------------------------------------------------------------------

    def is_metadata(self, host: str | CanonicalHost, *, provider_allow: Sequence[str] = ()) -> bool:
        """True when ``host`` (any spelling) is on the effective metadata denylist for this caller."""
        h = canonical_host(host) if isinstance(host, str) else host
        if self.allow_all_metadata or not self._deny.matches(h):
            return False
        return not self._allowed(h, _provider_set(_as_tuple(provider_allow), self.allow_key))

    def _allowed(self, host: CanonicalHost, provider: _HostSet) -> bool:
        return self._allow.matches(host) or provider.matches(host)

    def _provider(self, provider_allow: Sequence[str] | None, purpose: str) -> _HostSet:
        try:
            return _provider_set(_as_tuple(provider_allow), self.allow_key)
        except ValueError as e:
            raise SsrfBlocked(f"{purpose}: {e}") from None

    def check_url(self, url: str, *, purpose: str, provider_allow: Sequence[str] = (),
                  allow_private: bool, require_https_public: bool = True,
                  require_https: bool = False) -> None:
        """Config-time (and per-request) verdict on one egress URL.

        Args:
            url: the absolute URL as configured (``https://api.anthropic.com/v1``).
            purpose: who is asking, first word(s) of every reason: ``"base_url"``,
                ``"provider openai"``, ``"observability.otlp_url"``, ``"hook acme settings.url"``.
            provider_allow: that provider's ``allow_metadata_hosts`` (hosts, IPs or CIDRs).
            allow_private: True for provider upstreams (local models on private/loopback IPs); False for
                hook sidecars, webhooks and OTLP (loopback only).
            require_https_public: refuse http:// to anything but loopback (and, with ``allow_private``,
                literal private IPs). True for every configured egress URL.
            require_https: refuse http:// everywhere, loopback included
                (``observability.request_log_webhook_url``: "Must be https://").

        Raises:
            SsrfBlocked: with a one-line reason. Plaintext to a public host with ``allow_private`` reads
                ``<purpose> uses http:// with a public host: plain HTTP would expose the API key on the
                wire; use https://``.

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
            # httpx cannot connect to it either; still name the most specific reason (a spelling httpx
            # rejects, e.g. octal dotted or full-width digits, may decode to a metadata address).
            raw_host = netloc.rpartition("@")[2]
            if raw_host.startswith("["):
                raw_host = raw_host[: raw_host.find("]") + 1]
            elif ":" in raw_host:
                raw_host = raw_host.rpartition(":")[0]
            scheme = url[:scheme_sep].lower() if scheme_sep > 0 else ""
            if raw_host:
                try:
                    self.check_host(scheme, raw_host, purpose=purpose, provider_allow=provider_allow,
                                    allow_private=allow_private, require_https_public=require_https_public,
                                    require_https=require_https)
                except SsrfBlocked as blocked:
                    if "invalid host" not in blocked.reason:
                        raise blocked from None
            raise SsrfBlocked(f"{purpose}: invalid URL: {e}") from None
        self.check_host(parsed.scheme, parsed.host, purpose=purpose, provider_allow=provider_allow,
                        allow_private=allow_private, require_https_public=require_https_public,
                        require_https=require_https)

    def check_host(self, scheme: str, host: str, *, purpose: str, provider_allow: Sequence[str] = (),
                   allow_private: bool, require_https_public: bool = True,
                   require_https: bool = False) -> None:
        """:meth:`check_url` for an already split URL (``scheme`` lower-case, ``host`` as httpx gives it)."""
        if scheme not in ("http", "https"):
            raise SsrfBlocked(f"{purpose}: unsupported URL scheme {scheme + '://' if scheme else '(none)'}; "
                              f"use https://")
        if require_https and scheme != "https":
            raise SsrfBlocked(f"{purpose} must use https:// (plain http:// is not allowed here)")
        if not host:
            raise SsrfBlocked(f"{purpose}: URL has no host")
        try:
            h = canonical_host(host)
        except ValueError as e:
            raise SsrfBlocked(f"{purpose}: invalid host: {e}") from None
        shown = _shown(host, h)
        provider = self._provider(provider_allow, purpose)
        allowed = self._allowed(h, provider)
        if self._deny.matches(h) and not allowed:
            if self.allow_all_metadata:
                allowed = True  # "every cloud-metadata endpoint becomes reachable"
            else:
                raise SsrfBlocked(f"{purpose}: {shown} is a cloud-metadata endpoint; refused by the SSRF "
                                  f"guard (list it in {self.allow_key} only if this is deliberate)")
        if isinstance(h, str):
            cls = "loopback" if is_localhost_name(h) else "name"
        else:
            cls = address_class(h)
        if cls in _NEVER:
            raise SsrfBlocked(f"{purpose}: {shown} is {_CLASS_TEXT[cls]}, not a valid upstream")
        if not allowed and (cls == "link-local" or (not allow_private and cls in ("private", "cgnat"))):
            tail = ("" if allow_private else
                    " (only loopback or public https:// endpoints are allowed here)")
            raise SsrfBlocked(f"{purpose}: {shown} is {_CLASS_TEXT[cls]}; refused by the SSRF guard{tail}")
        if scheme == "http" and require_https_public and not allowed:
            if cls == "loopback" or (allow_private and cls in ("private", "cgnat")):
                return
            if allow_private:
                raise SsrfBlocked(f"{purpose} uses http:// with a public host: plain HTTP would expose the "
                                  f"API key on the wire; use https://")
            raise SsrfBlocked(f"{purpose} uses http:// with a non-loopback host ({shown}): remote endpoints "
                              f"must use https://")

    def check_resolved(self, host: str, addresses: Iterable[str | IPAddress], *, purpose: str,
                       provider_allow: Sequence[str] = (), allow_private: bool) -> list[IPAddress]:
        """Connect-time verdict: every address ``host`` resolved to must pass, or the host is refused.

        Args:
            host: the host as the client connects to it (a name or an IP literal in any spelling).
            addresses: what the resolver answered (``getaddrinfo`` sockaddr hosts or ``ip_address``es).
            purpose, provider_allow, allow_private: as :meth:`check_url`.

        Returns:
            the checked addresses, in resolver order, duplicates removed; connect to these, never
            re-resolve the name.

        Raises:
            SsrfBlocked: one address is refused (a mixed answer is refused whole: it is how rebinding
                attacks look), naming the host and the address.

        """
        try:
            h = canonical_host(host)
        except ValueError as e:
            raise SsrfBlocked(f"{purpose}: invalid host: {e}") from None
        provider = self._provider(provider_allow, purpose)
        name_allowed = self._allowed(h, provider) or (self.allow_all_metadata and self._deny.matches(h))
        if self._deny.matches(h) and not name_allowed:
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
            allowed = name_allowed or self._allowed(ip, provider) or (
                self.allow_all_metadata and self._deny.matches(ip))
            where = f"{host} resolved to {ip}" if isinstance(h, str) else f"{host}"
            if self._deny.matches(ip) and not allowed:
                raise SsrfBlocked(f"{purpose}: {where}, a cloud-metadata address; refused at connect time "
                                  f"by the SSRF guard")
            cls = address_class(ip)
            if cls in _NEVER:
                raise SsrfBlocked(f"{purpose}: {where}, {_CLASS_TEXT[cls]}; refused at connect time")
            if not allowed:
                if isinstance(h, str):
                    if is_localhost_name(h):
                        ok = cls == "loopback"
                    else:
                        ok = cls == "public"
                    if not ok:
                        raise SsrfBlocked(
                            f"{purpose}: {where}, {_CLASS_TEXT.get(cls, 'a public address')}; refused at "
                            f"connect time (DNS rebinding guard: "
                            + ("a localhost name must resolve to loopback only)" if is_localhost_name(h)
                               else f"a DNS name must resolve to public addresses unless it is listed in "
                                    f"{self.allow_key})"))
                elif cls == "link-local" or (not allow_private and cls in ("private", "cgnat")):
                    raise SsrfBlocked(f"{purpose}: {where} is {_CLASS_TEXT[cls]}; refused at connect time")
            out.append(ip)
        return out


def _as_tuple(entries: Sequence[str] | Iterable[str] | None) -> tuple[str, ...]:
    if not entries:
        return ()
    if isinstance(entries, str):
        return (entries,)
    return tuple(str(e) for e in entries)

