"""The SSRF guard's public API: ONE guard for every egress path.

Every outbound HTTP request Busbar makes (provider upstreams, health probes, OAuth token endpoints,
hook sidecars, request-log webhooks, OTLP) is checked twice:

1. at config load / admin write: ``SsrfPolicy.check_url(url, purpose=..., provider_allow=...,
   allow_private=...)`` raises :class:`SsrfBlocked` with a one-line reason;
2. at connect time: the client uses ``guarded_transport(policy, purpose=..., allow_private=...)``,
   whose network backend checks every address the host resolves to (DNS rebinding, handout C032).

Public names:

- ``canonical_host(host) -> str | IPv4Address | IPv6Address``: obfuscation-aware canonicalization.
- ``SsrfPolicy(blocked_metadata_hosts=(), allow_metadata_hosts=(), allow_all_metadata=False)``:
  ``check_url``, ``check_host``, ``check_resolved``, ``is_metadata``, ``effective_denylist``,
  ``startup_warnings``, ``from_config``.
- ``SsrfBlocked(reason)``.
- ``BUILTIN_METADATA_HOSTS``: the hardcoded denylist.
- ``guarded_transport(...) -> httpx.AsyncBaseTransport``, ``guarded_async_client(...)``,
  ``system_resolver``.

Source: seeds 001 "security", "providers", "observability", "Startup validation summary";
ORIGINAL.md §2.18; handout case C032; docs/security.md.
"""
from __future__ import annotations

from busbar.security.hosts import address_class, canonical_host
from busbar.security.policy import BUILTIN_METADATA_HOSTS, SsrfBlocked, SsrfPolicy
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
    "Resolver",
    "SsrfBlocked",
    "SsrfPolicy",
    "address_class",
    "canonical_host",
    "guarded_async_client",
    "guarded_transport",
    "system_resolver",
]
