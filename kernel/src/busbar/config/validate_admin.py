"""Admin-plane keys this build accepts only in part: refused at boot (and ``--validate``) when set.

``unsupported(cfg, src) -> [(key path, fault line)]``: an ``auth.admin_auth`` entry other than the
built-in ``admin-tokens`` (an identity-provider module gating the admin API) is refused until
IdP admin principals land; the admin chain serves ``admin-tokens`` and ``[]`` (open) today.
Runs with ``check_support`` only, like ``busbar.config.support``.

Source: docs/admin.md#authentication.
"""
from __future__ import annotations

from typing import Any

from busbar.config.schema_base import BUILTIN_ADMIN_MODULE

__all__ = ["unsupported"]


def unsupported(cfg: Any, src: str) -> list[tuple[str, str]]:
    """Fault lines for the admin settings this build cannot honour (see the module docstring)."""
    out = []
    for i, mod in enumerate(cfg.auth.modules("admin_auth")):
        if mod.name != BUILTIN_ADMIN_MODULE:
            path = f"auth.admin_auth[{i}]"
            out.append((path, f"{src}: {path}: '{mod.name}': an identity-provider module gating the admin API "
                              f"is not supported in this build; use {BUILTIN_ADMIN_MODULE} with a token: "
                              f"(see docs/admin.md#authentication)"))
    return out
