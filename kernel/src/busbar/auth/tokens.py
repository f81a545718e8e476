"""The ``bbk_`` virtual-key token codec (docs/auth.md#virtual-keys).

Wire form: ``bbk_`` + base64url(JSON ``{"sub", "exp", "kid", "g"}``) + ``.`` + base64url(ed25519
signature over the base64url payload text), both segments unpadded and canonical (:func:`verify`
refuses a segment whose last character carries stray low bits, so each key has exactly one valid
token string). ``sub`` is the key id
(``vk_...``), ``exp`` the expiry in Unix seconds, ``kid`` the signing key's id, ``g`` the key's
binding generation (a rotation raises the stored generation, so an older token stops verifying).
Deliberately not a JWT: one algorithm, no header to negotiate.

:func:`verify` checks shape, signature and expiry only; the key's stored binding (enabled,
generation, denylist) is the verifier's job (:mod:`busbar.auth.keys`). Every failure raises the
same :class:`TokenInvalid` with the same message, so a caller cannot tell a forged token from an
expired one.
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass

import orjson

from busbar.auth.signing import Keyring

__all__ = ["TOKEN_PREFIX", "TokenClaims", "TokenInvalid", "looks_like_token", "mint", "mint_token", "verify"]

TOKEN_PREFIX = "bbk_"
_SHAPE = re.compile(r"bbk_([A-Za-z0-9_-]{8,2048})\.([A-Za-z0-9_-]{86})")   # 64-byte signature = 86 chars


class TokenInvalid(Exception):
    """The token is malformed, forged, signed by an unknown key or expired (never says which)."""

    def __init__(self) -> None:
        super().__init__("invalid virtual key")


@dataclass(frozen=True, slots=True)
class TokenClaims:
    """A verified token's claims: ``sub`` key id, ``exp`` Unix seconds, ``kid`` key id, ``g`` generation."""

    sub: str
    exp: int
    kid: str
    g: int = 0


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict unpadded base64url: ``text`` must be the one canonical encoding of its bytes (a final
    character whose unused low bits are set decodes to the same bytes; refused so a token has exactly
    one valid spelling).

    Raises:
        ValueError: ``text`` is not canonical base64url.
    """
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("non-canonical base64url")
    return data


def mint(keyring: Keyring, sub: str, exp: int, generation: int = 0) -> str:
    """A signed token for key ``sub`` expiring at ``exp`` (Unix seconds), signed by the active key.

    Raises:
        ValueError: ``sub`` is empty or ``exp``/``generation`` is negative.
    """
    if not sub or exp < 0 or generation < 0:
        raise ValueError("mint: sub must be non-empty and exp/generation non-negative")
    payload = _b64(orjson.dumps({"sub": sub, "exp": exp, "kid": keyring.kid, "g": generation}))
    return f"{TOKEN_PREFIX}{payload}.{_b64(keyring.sign(payload.encode('ascii')))}"


mint_token = mint
"""Alias of :func:`mint` (the admin key service's spelling: ``mint_token(keyring, sub=, exp=, generation=)``)."""


def looks_like_token(text: str) -> bool:
    """Whether ``text`` has the ``bbk_`` prefix (cheap routing between chain modules, not a check)."""
    return text.startswith(TOKEN_PREFIX)


def verify(keyring: Keyring, token: str, now: int) -> TokenClaims:
    """The claims of ``token`` if its shape, signature and expiry (``now`` Unix seconds) hold.

    Raises:
        TokenInvalid: anything else (one opaque failure).
    """
    m = _SHAPE.fullmatch(token)
    if m is None:
        raise TokenInvalid()
    payload, sig = m.group(1), m.group(2)
    try:
        claims = orjson.loads(_unb64(payload))
        sub, exp, kid, g = claims["sub"], claims["exp"], claims["kid"], claims.get("g", 0)
        signature = _unb64(sig)
    except (ValueError, TypeError, KeyError):
        raise TokenInvalid() from None
    if not (isinstance(sub, str) and sub and isinstance(kid, str) and type(exp) is int and type(g) is int):
        raise TokenInvalid()
    if not keyring.check(kid, signature, payload.encode("ascii")) or now >= exp:
        raise TokenInvalid()
    return TokenClaims(sub, exp, kid, g)
