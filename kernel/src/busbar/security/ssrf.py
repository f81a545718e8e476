"""The SSRF guard's public API in the kernel: ONE guard for every egress path.

The pure policy (host canonicalization, address classes, the metadata denylist, the verdicts and
:class:`HostGuard`) is owned by the sdk, :mod:`busbar_sdk.ssrf`, which the first-party webrequest
forwarder imports too; this module re-exports it for kernel code. Every outbound HTTP request Busbar
makes (provider upstreams, health probes, OAuth token endpoints, hook sidecars, request-log webhooks,
OTLP) is checked twice:

1. at config load / admin write: ``SsrfPolicy.check_url(url, purpose=..., provider_allow=...,
   allow_private=...)`` raises :class:`SsrfBlocked` with a one-line reason;
2. at request and connect time: a ``HostGuard(policy, purpose=..., provider_allow=...,
   allow_private=...)`` checks each request URL and every address the host resolves to (DNS
   rebinding); the request path's aiohttp client installs it with
   ``busbar.security.connector.guarded_connector``. A provider's ``allow_metadata_hosts`` lives in
   that provider's own guard only (``busbar.proxy.upstream.AiohttpUpstream``: one guard and one
   connection pool per allow-list), never in another provider's.

See docs/security.md "SSRF guard".
"""
from __future__ import annotations

from typing import Any

from busbar_sdk.ssrf import (
    BUILTIN_METADATA_HOSTS,
    HostGuard,
    SsrfBlocked,
    SsrfPolicy,
    address_class,
    canonical_host,
)

from busbar.security.resolve import Resolver, system_resolver

__all__ = [
    "BUILTIN_METADATA_HOSTS",
    "HostGuard",
    "Resolver",
    "SsrfBlocked",
    "SsrfPolicy",
    "address_class",
    "canonical_host",
    "policy_of",
    "system_resolver",
]


def policy_of(security: Any) -> SsrfPolicy:
    """The :class:`SsrfPolicy` of the config's ``security:`` block (``blocked_metadata_hosts``,
    ``allow_metadata_hosts``, ``allow_all_metadata``): every kernel egress guard and, through
    ``busbar_sdk.ssrf.set_deployment_policy``, every in-process plugin's start from it.

    Raises:
        ValueError: an entry is not a host, IP or CIDR (config validation reports it first).
    """
    return SsrfPolicy(security.blocked_metadata_hosts, security.allow_metadata_hosts, security.allow_all_metadata)
