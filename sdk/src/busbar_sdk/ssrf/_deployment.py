"""The deployment's SSRF policy, as the host process set it: what an in-process plugin's egress
guard starts from, so the config's ``security:`` block applies to plugin egress (a webrequest
sidecar URL, an OIDC ``jwks_url``) exactly as to the kernel's own (docs/security.md "SSRF guard").
"""
from __future__ import annotations

from busbar_sdk.ssrf._policy import SsrfPolicy

__all__ = ["deployment_policy", "set_deployment_policy"]

_current = SsrfPolicy()


def deployment_policy() -> SsrfPolicy:
    """The policy of the deployment's ``security:`` block (``SsrfPolicy()``, the built-in
    denylist only, until the host sets one). Build a guard from it when settings are applied:
    ``HostGuard(deployment_policy().with_allow_key("allow_hosts"), purpose=..., ...)``."""
    return _current


def set_deployment_policy(policy: SsrfPolicy) -> None:
    """Set the deployment's policy (the kernel, from ``security:``, before any plugin opens)."""
    global _current
    _current = policy
