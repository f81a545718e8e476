"""Egress credentials for the non-native auth styles: bearer, api-key, jwt-bearer, oauth-client-credentials.

``Credentials.headers(provider) -> dict | None`` (async): ``None`` means "native auth" (the
dialect signs or sets its own header: Anthropic key prefixes, Gemini ``x-goog-api-key``, Bedrock
SigV4). Otherwise the auth headers for ``provider.auth``:

- ``bearer``: ``Authorization: Bearer <api_key>``; ``api-key``: ``api-key: <api_key>`` (Azure).
- ``jwt-bearer`` (RFC 7523): ``api_key`` resolves to a service-account JSON (``client_email``,
  ``private_key``, ``token_uri``); Busbar signs an RS256 assertion (PyJWT) with ``iss`` = the
  client email, ``aud`` = the key's ``token_uri`` (default Google's), ``scope`` = the Google
  cloud-platform scope, ``sub`` only when ``subject`` is set, and exchanges it for a bearer at
  ``token_uri`` (``token_url``/``scope`` belong to oauth-client-credentials only).
- ``oauth-client-credentials`` (RFC 6749 §4.4): ``api_key`` resolves to ``client_id:client_secret``,
  POSTed (HTTP Basic) with ``grant_type=client_credentials`` and ``scope`` to ``token_url``.

Minted tokens are cached per provider and refreshed 60 s before ``expires_in`` runs out; one
refresh at a time per provider. Token endpoints are called through the gateway's SSRF-guarded
client. Errors raise ``CredentialError`` (the attempt then fails as an ``auth`` disposition).

Source: docs/configuration.md, docs/catalog.md#fields (auth, token_url, scope, subject).
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import jwt
from busbar_sdk.ssrf import SsrfBlocked

from busbar.proxy.upstream import Upstream, UpstreamError, fetch, form_request

if TYPE_CHECKING:
    from busbar.proxy.runtime import Provider

GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
REFRESH_MARGIN_S = 60.0
TOKEN_TIMEOUT_S = 10.0


class CredentialError(Exception):
    """A token could not be minted; ``str(e)`` names the provider and the reason (no secrets)."""


class Credentials:
    """Per-provider token cache over the gateway's upstream client (``busbar.proxy.upstream``)."""

    def __init__(self, upstream: Upstream, clock: Callable[[], float] = time.time):
        self.upstream = upstream
        self.clock = clock
        self._tokens: dict[str, tuple[str, float]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def headers(self, provider: Provider) -> dict[str, str] | None:
        """The auth headers for ``provider``, or ``None`` for the protocol's native auth."""
        style = provider.auth
        if style is None:
            return None
        if style == "bearer":
            return {"authorization": f"Bearer {provider.api_key}"}
        if style == "api-key":
            return {"api-key": provider.api_key}
        return {"authorization": f"Bearer {await self._token(provider)}"}

    async def _token(self, provider: Provider) -> str:
        cached = self._tokens.get(provider.name)
        if cached and cached[1] - REFRESH_MARGIN_S > self.clock():
            return cached[0]
        lock = self._locks.setdefault(provider.name, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(provider.name)
            if cached and cached[1] - REFRESH_MARGIN_S > self.clock():
                return cached[0]
            if provider.auth == "jwt-bearer":
                token, ttl = await self._jwt_bearer(provider)
            elif provider.auth == "oauth-client-credentials":
                token, ttl = await self._client_credentials(provider)
            else:
                raise CredentialError(f"provider {provider.name}: unknown auth style {provider.auth!r}")
            self._tokens[provider.name] = (token, self.clock() + ttl)
            return token

    async def _jwt_bearer(self, provider: Provider) -> tuple[str, float]:
        try:
            key = json.loads(provider.api_key)
            email, private_key = key["client_email"], key["private_key"]
        except (ValueError, KeyError, TypeError):
            raise CredentialError(f"provider {provider.name}: jwt-bearer needs api_key to resolve to a "
                                  f"service-account JSON with client_email and private_key") from None
        token_url = key.get("token_uri") or "https://oauth2.googleapis.com/token"
        now = int(self.clock())
        claims = {"iss": email, "aud": token_url, "iat": now, "exp": now + 3600, "scope": GOOGLE_SCOPE}
        if provider.subject:
            claims["sub"] = provider.subject
        headers = {"kid": key["private_key_id"]} if key.get("private_key_id") else None
        try:
            assertion = jwt.encode(claims, private_key, algorithm="RS256", headers=headers)
        except (ValueError, TypeError, jwt.PyJWTError) as e:
            raise CredentialError(f"provider {provider.name}: cannot sign the JWT assertion: {e}") from None
        return await self._exchange(provider, token_url, data={
            "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion})

    async def _client_credentials(self, provider: Provider) -> tuple[str, float]:
        cid, sep, secret = provider.api_key.partition(":")
        if not sep or not cid:
            raise CredentialError(f"provider {provider.name}: oauth-client-credentials needs api_key to "
                                  f"resolve to client_id:client_secret")
        if not provider.token_url:
            raise CredentialError(f"provider {provider.name}: oauth-client-credentials needs token_url")
        data = {"grant_type": "client_credentials"}
        if provider.scope:
            data["scope"] = provider.scope
        return await self._exchange(provider, provider.token_url, data=data, auth=(cid, secret))

    async def _exchange(self, provider: Provider, url: str, *, data: dict[str, str],
                        auth: tuple[str, str] | None = None) -> tuple[str, float]:
        headers, form = form_request(data, auth)
        try:
            status, _headers, raw = await fetch(self.upstream, "POST", url, headers, form, TOKEN_TIMEOUT_S,
                                                 scope=provider.name)
        except (UpstreamError, TimeoutError) as e:
            raise CredentialError(f"provider {provider.name}: token endpoint unreachable: "
                                  f"{str(e) or 'timed out'}") from None
        except SsrfBlocked as e:    # e.g. a service-account file's token_uri (never seen at config load)
            raise CredentialError(f"provider {provider.name}: token endpoint refused by the SSRF guard: "
                                  f"{e.reason}") from None
        if status != 200:
            raise CredentialError(f"provider {provider.name}: token endpoint answered HTTP {status}")
        try:
            body = json.loads(raw)
            token = body["access_token"]
            ttl = float(body.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError):
            raise CredentialError(f"provider {provider.name}: token endpoint gave no access_token") from None
        return token, ttl
