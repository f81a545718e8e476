"""The SSRF guard's public API: ONE guard for every egress path.

Every outbound HTTP request Busbar makes (provider upstreams, health probes, OAuth token endpoints,
hook sidecars, request-log webhooks, OTLP) is checked twice:

1. at config load / admin write: ``SsrfPolicy.check_url(url, purpose=..., provider_allow=...,
   allow_private=...)`` raises :class:`SsrfBlocked` with a one-line reason;
2. at request and connect time: a ``HostGuard(policy, purpose=..., allow_private=...)`` checks each
   request URL and every address the host resolves to (DNS rebinding, handout C032); the request
   path's aiohttp client installs it with ``busbar.security.connector.guarded_connector``, httpx
   clients with ``guarded_transport``.

Public names:

- ``canonical_host(host) -> str | IPv4Address | IPv6Address``: obfuscation-aware canonicalization.
- ``SsrfPolicy(blocked_metadata_hosts=(), allow_metadata_hosts=(), allow_all_metadata=False)``:
  ``check_url``, ``check_host``, ``check_resolved``, ``is_metadata``, ``effective_denylist``,
  ``startup_warnings``, ``from_config``.
- ``SsrfBlocked(reason)``.
- ``BUILTIN_METADATA_HOSTS``: the hardcoded denylist.
- ``HostGuard(policy, purpose=..., provider_allow=..., allow_private=...)``.
- ``guarded_transport(...) -> httpx.AsyncBaseTransport``, ``guarded_async_client(...)``,
  ``system_resolver``.

Source: seeds 001 "security", "providers", "observability", "Startup validation summary";
ORIGINAL.md §2.18; handout case C032; docs/security.md.
"""
from __future__ import annotations

from busbar.security.hosts import address_class, canonical_host
from busbar.security.policy import BUILTIN_METADATA_HOSTS, SsrfBlocked, SsrfPolicy
from busbar.security.resolve import HostGuard
from busbar.security.transport import (
    GuardedTransport,
    Resolver,
    guarded_async_client,
    guarded_transport,
    system_resolver,
)

__all__ = [
    "BUILTIN_METADATA_HOSTS",
    "GuardedTransport",
    "HostGuard",
    "Resolver",
    "SsrfBlocked",
    "SsrfPolicy",
    "address_class",
    "canonical_host",
    "guarded_async_client",
    "guarded_transport",
    "system_resolver",
]
