"""The SSRF policy, one owner for the kernel and for plugins that make egress calls.

Pure verdicts, no I/O: host canonicalization (every spelling of an address folds onto one form),
address classes, the cloud-metadata denylist and the verdicts on a configured URL and on the
addresses a host resolved to. The kernel's guarded clients (provider upstreams, token endpoints,
health probes) and the first-party webrequest forwarder both import it from here, so one rule set
judges every egress path (docs/security.md "SSRF guard").

Public names:

- :func:`canonical_host`, :func:`address_class`, :func:`embedded_ipv4`, :func:`is_localhost_name`,
  :func:`parse_host_or_network`, :data:`ADDRESS_CLASSES`: hosts and addresses.
- :class:`SsrfPolicy` (``check_url``, ``check_host``, ``check_resolved``, ``is_metadata``,
  ``effective_denylist``, ``startup_warnings``, ``from_config``), :class:`SsrfBlocked`,
  :data:`BUILTIN_METADATA_HOSTS`: verdicts.
- :class:`HostGuard`: one purpose's verdicts bound to its own allow-list; :func:`redact_url`.
- :func:`deployment_policy` / :func:`set_deployment_policy`: the deployment's ``security:`` policy,
  set by the kernel before plugins open; a plugin's egress guard starts from it.
- :func:`host_addresses`, :func:`system_resolver`, :func:`unique_addresses`, :data:`SyncResolver`:
  the resolve step of a connect-time guard (which addresses ``HostGuard.check_addresses`` judges).

Example::

    from busbar_sdk.ssrf import HostGuard, SsrfBlocked, SsrfPolicy

    guard = HostGuard(SsrfPolicy(allow_key="allow_hosts"), purpose="settings.url", allow_private=False)
    guard.check_url("http://169.254.169.254/")    # raises SsrfBlocked: a cloud-metadata endpoint
"""
from __future__ import annotations

from busbar_sdk.ssrf._deployment import deployment_policy, set_deployment_policy
from busbar_sdk.ssrf._guard import HostGuard, redact_url
from busbar_sdk.ssrf._hosts import (
    ADDRESS_CLASSES,
    CanonicalHost,
    IPAddress,
    Network,
    address_class,
    canonical_host,
    embedded_ipv4,
    is_localhost_name,
    parse_host_or_network,
)
from busbar_sdk.ssrf._policy import BUILTIN_METADATA_HOSTS, SsrfBlocked, SsrfPolicy
from busbar_sdk.ssrf._resolve import SyncResolver, host_addresses, system_resolver, unique_addresses

__all__ = [
    "ADDRESS_CLASSES",
    "BUILTIN_METADATA_HOSTS",
    "CanonicalHost",
    "HostGuard",
    "IPAddress",
    "Network",
    "SsrfBlocked",
    "SsrfPolicy",
    "SyncResolver",
    "address_class",
    "canonical_host",
    "deployment_policy",
    "embedded_ipv4",
    "host_addresses",
    "is_localhost_name",
    "parse_host_or_network",
    "redact_url",
    "set_deployment_policy",
    "system_resolver",
    "unique_addresses",
]
