"""The forwarder's settings: parsed and validated once, at open and at every configure.

Every fault is a :class:`SettingsError` naming the key, so a bad ``settings:`` block fails the boot
(``busbar_open``) or the admin PATCH (``configure`` is then not acknowledged) with one line. Keys
the forwarder does not know are the sidecar's own settings and are kept as they are.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from busbar_sdk.settings_schema import header_faults
from busbar_sdk.ssrf import HostGuard, SsrfBlocked, parse_host_or_network, redact_url

from busbar_webrequest_hook._connect import settings_guard

__all__ = ["FORWARDER_KEYS", "SETTINGS_SCHEMA", "Settings", "SettingsError", "parse_settings"]

SETTINGS_SCHEMA: dict[str, Any] = json.loads(
    resources.files("busbar_webrequest_hook").joinpath("settings_schema.json").read_text("utf-8"))
FORWARDER_KEYS = frozenset(SETTINGS_SCHEMA["properties"])

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_HOP_HEADERS = frozenset({"host", "content-length", "content-type", "content-encoding", "transfer-encoding",
                          "connection", "keep-alive", "te", "trailer", "upgrade", "accept-encoding"})


class SettingsError(ValueError):
    """One line naming the offending ``settings.<key>``."""


@dataclass(frozen=True)
class Settings:
    """The validated forwarder settings (see ``settings_schema.json`` for meanings and defaults)."""

    url: str
    timeout_s: float = 5.0
    max_reply_bytes: int = 65536
    max_reply_depth: int = 64
    max_connections: int = 64
    max_keepalive_connections: int = 32
    keepalive_s: float = 30.0
    headers: dict[str, str] = field(default_factory=dict)
    ca_file: str | None = None
    guard: HostGuard = field(default_factory=settings_guard)
    raw: dict[str, Any] = field(default_factory=dict)

    def redacted(self) -> dict[str, Any]:
        """The settings map as ``status`` reports it: header values and URL userinfo hidden."""
        out = dict(self.raw)
        out["url"] = redact_url(self.url)
        if "headers" in out:
            out["headers"] = {k: "***" for k in self.headers}
        return out

    def for_sidecar(self) -> dict[str, Any]:
        """The settings map relayed in ``configure``: everything but ``headers`` (credentials stay
        in transport headers, never in a body the sidecar might echo back in ``status``)."""
        return {k: v for k, v in self.raw.items() if k != "headers"}


def _int(raw: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    v = raw.get(key, default)
    if type(v) is not int or not lo <= v <= hi:
        raise SettingsError(f"settings.{key} must be an integer in {lo}..{hi}, found {v!r}")
    return v


def _num(raw: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    v = raw.get(key, default)
    if type(v) not in (int, float) or not lo <= v <= hi:
        raise SettingsError(f"settings.{key} must be a number in {lo:g}..{hi:g}, found {v!r}")
    return float(v)


def parse_settings(raw: Any) -> Settings:
    """Validate a settings map.

    Raises:
        SettingsError: a missing or malformed key, or a ``url`` the SSRF guard refuses.
    """
    if not isinstance(raw, dict):
        raise SettingsError(f"settings must be a map, found {type(raw).__name__}")
    allow_list = raw.get("allow_hosts", [])
    if not isinstance(allow_list, list) or not all(isinstance(e, str) for e in allow_list):
        raise SettingsError("settings.allow_hosts must be a list of host names, IP addresses or CIDRs")
    for entry in allow_list:
        try:
            parse_host_or_network(entry)
        except ValueError as e:
            raise SettingsError(f"settings.allow_hosts: {entry!r} is not a host name, IP address or CIDR "
                                f"({e})") from None
    guard = settings_guard(allow_list)
    url = raw.get("url")
    if not isinstance(url, str) or not url:
        raise SettingsError('settings.url is required: the sidecar endpoint, e.g. "https://sidecar.internal/hook" '
                            'or "http://127.0.0.1:8787/"')
    try:
        guard.check_url(url)
    except SsrfBlocked as e:
        raise SettingsError(e.reason) from None
    headers = raw.get("headers", {})
    if not isinstance(headers, dict):
        raise SettingsError("settings.headers must be a map of header name to string value")
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise SettingsError(f"settings.headers: {name!r} is not a valid header name")
        if name.lower() in _HOP_HEADERS or name.lower().startswith("proxy-"):
            raise SettingsError(f"settings.headers: {name} is set by the forwarder itself; remove it")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise SettingsError(f"settings.headers.{name} must be a single-line string")
    for path, text in header_faults(SETTINGS_SCHEMA, raw):       # request_headers: the kernel's own check
        raise SettingsError(f"settings.{path}: {text}")
    ca_file = raw.get("ca_file")
    if ca_file is not None and (not isinstance(ca_file, str) or not ca_file):
        raise SettingsError("settings.ca_file must be the path of a PEM bundle")
    max_connections = _int(raw, "max_connections", 64, 1, 1024)
    keepalive = _int(raw, "max_keepalive_connections", min(32, max_connections), 0, 1024)
    if keepalive > max_connections:
        raise SettingsError(f"settings.max_keepalive_connections ({keepalive}) must not exceed "
                            f"settings.max_connections ({max_connections})")
    return Settings(
        url=url,
        timeout_s=_int(raw, "timeout_ms", 5000, 1, 30000) / 1000.0,
        max_reply_bytes=_int(raw, "max_reply_bytes", 65536, 1024, 16 << 20),
        max_reply_depth=_int(raw, "max_reply_depth", 64, 1, 256),
        max_connections=max_connections,
        max_keepalive_connections=keepalive,
        keepalive_s=_num(raw, "keepalive_s", 30.0, 1.0, 600.0),
        headers=dict(headers),
        ca_file=ca_file,
        guard=guard,
        raw=dict(raw),
    )
