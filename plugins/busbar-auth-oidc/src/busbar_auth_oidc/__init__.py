"""busbar-auth-oidc: verify OIDC/JWT bearer tokens in ``auth.chain`` (docs/auth.md#oidc).

Settings (``auth.chain: [ { oidc: { settings: {...} } } ]``): ``issuer``, ``audience``,
``roles_claim`` (default ``roles``), exactly one of ``jwks_url`` / ``jwks_file``, ``algorithms``
(default RS256, ES256), ``jwks_cache_secs`` (300), ``verdict_ttl_secs`` (60), ``leeway_secs`` (30),
``allow_hosts``. Runtime module name: ``oidc`` (bind roles under ``auth.role_bindings.oidc``).

A credential that is not a JWT (three dot-separated segments) is passed to the next chain module;
a JWT that fails (signature, ``iss``, ``aud``, ``exp``, unknown ``kid``, a disallowed algorithm) is
rejected; a valid one identifies ``sub`` with the roles of ``roles_claim``, cacheable by Busbar for
``verdict_ttl_secs`` (never past the token's ``exp``).
"""
from __future__ import annotations

import json
import time
from importlib import resources
from typing import Any, ClassVar

import jwt
from busbar_sdk import AuthPlugin, export_plugin
from busbar_sdk.models import AuthPass, AuthReject, Identity
from busbar_sdk.ssrf import SsrfBlocked

from busbar_auth_oidc._jwks import JwksSource, jwks_guard

__all__ = ["OidcAuth", "plugin"]

__version__ = "1.5.0"

#: The signed settings schema (package data): its keys and its asymmetric algorithms are the only
#: ones taken (an HMAC algorithm would verify with a JWKS key as a shared secret).
_SCHEMA: dict[str, Any] = json.loads(resources.files(__name__).joinpath("settings_schema.json").read_text("utf-8"))
_ALGORITHMS: tuple[str, ...] = tuple(_SCHEMA["properties"]["algorithms"]["items"]["enum"])

_DEFAULTS: dict[str, Any] = {"roles_claim": "roles", "algorithms": ["RS256", "ES256"], "jwks_cache_secs": 300,
                             "verdict_ttl_secs": 60, "leeway_secs": 30, "allow_hosts": []}


class OidcAuth(AuthPlugin):
    """One configured issuer. Raises ``ValueError`` at open for settings that cannot work."""

    module_name: ClassVar[str] = "oidc"

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        unknown = sorted(set(settings) - set(_SCHEMA["properties"]))
        if unknown:
            raise ValueError(f"settings.{unknown[0]}: unknown setting for oidc (it takes "
                             f"{', '.join(sorted(_SCHEMA['properties']))})")
        s = {**_DEFAULTS, **settings}
        algorithms = s["algorithms"]
        if not isinstance(algorithms, list) or not algorithms or any(a not in _ALGORITHMS for a in algorithms):
            raise ValueError(f"settings.algorithms: must list one or more of {', '.join(_ALGORITHMS)}, found "
                             f"{algorithms!r}")
        for need in ("issuer", "audience"):
            if not isinstance(s.get(need), str) or not s[need]:
                raise ValueError(f"settings.{need}: required (a non-empty string)")
        if (s.get("jwks_url") is None) == (s.get("jwks_file") is None):
            raise ValueError("settings: set exactly one of jwks_url and jwks_file")
        guard = jwks_guard(s["allow_hosts"])
        if s.get("jwks_url") is not None:
            try:
                guard.check_url(s["jwks_url"])
            except SsrfBlocked as e:
                raise ValueError(str(e)) from None
        self.issuer, self.audience, self.roles_claim = s["issuer"], s["audience"], s["roles_claim"]
        self.algorithms = list(s["algorithms"])
        self.ttl, self.leeway = int(s["verdict_ttl_secs"]), int(s["leeway_secs"])
        self.jwks = JwksSource(s.get("jwks_url"), s.get("jwks_file"), int(s["jwks_cache_secs"]), guard)
        if s.get("jwks_file") is not None:
            self.jwks.load_file()       # a missing or malformed file refuses the start, not every token

    def _roles(self, claims: dict[str, Any]) -> tuple[str, ...]:
        value = claims.get(self.roles_claim)
        if isinstance(value, str):
            return tuple(value.split())
        if isinstance(value, list):
            return tuple(v for v in value if isinstance(v, str))
        return ()

    def authenticate(self, credential: str) -> Identity | AuthReject | AuthPass | None:
        if credential.count(".") != 2 or credential.startswith("bbk_"):
            return AuthPass()
        try:
            header = jwt.get_unverified_header(credential)
            kid = header.get("kid")
            key = self.jwks.key(kid) if isinstance(kid, str) else None
            if key is None or header.get("alg") not in self.algorithms:
                return AuthReject(message="invalid token")
            claims = jwt.decode(credential, key=key.key, algorithms=self.algorithms, audience=self.audience,
                                issuer=self.issuer, leeway=self.leeway,
                                options={"require": ["exp", "iss", "aud", "sub"]})
        except jwt.PyJWTError:
            return AuthReject(message="invalid token")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            return AuthReject(message="invalid token")
        ttl = max(0, min(self.ttl, int(claims["exp"]) - int(time.time())))
        return Identity(sub=sub, groups=self._roles(claims), name=claims.get("name") if isinstance(
            claims.get("name"), str) else None, ttl_secs=ttl or None)

    def close(self) -> None:
        self.jwks.close()


plugin = export_plugin(OidcAuth)
