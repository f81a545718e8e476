"""Check a store plugin's ``settings`` mapping: known keys, types, required keys, one line per fault.

``check_settings(settings, spec, backend)`` with ``spec = {name: (type, default | REQUIRED)}``
returns the settings with defaults filled in, or raises
:class:`~busbar_sdk.store.errors.StoreInvalid` whose message has one line per fault, each naming
``store.settings.<key>`` and the fix.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from busbar_sdk.store.errors import StoreInvalid

__all__ = ["REQUIRED", "check_settings", "redact_url"]

REQUIRED = object()


def check_settings(settings: dict[str, Any], spec: dict[str, tuple[type, Any]], backend: str) -> dict[str, Any]:
    """Validate ``settings`` against ``spec``; see the module docstring.

    Raises:
        StoreInvalid: unknown key, wrong type or missing required key (all faults, one per line).
    """
    faults: list[str] = []
    known = ", ".join(sorted(spec))
    for name in sorted(set(settings) - set(spec)):
        faults.append(f"store.settings.{name}: unknown setting for the {backend} store (it takes {known})")
    out: dict[str, Any] = {}
    for name, (typ, default) in spec.items():
        if name not in settings:
            if default is REQUIRED:
                faults.append(f"store.settings.{name}: required by the {backend} store")
            else:
                out[name] = default
            continue
        value = settings[name]
        if (isinstance(value, bool) and typ is not bool) or not isinstance(value, typ):
            faults.append(f"store.settings.{name}: expected {'an integer' if typ is int else 'a ' + typ.__name__}, "
                          f"got {type(value).__name__}")
            continue
        out[name] = value
    if faults:
        raise StoreInvalid("\n".join(faults))
    return out


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs); unchanged without one."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
