"""Bedrock ingress: AWS SigV4 signatures made with a virtual key's AWS credential (docs/auth.md#bedrock-sigv4).

A key minted with ``issue_aws_credential: true`` owns a ``kind: sigv4`` credential in the store
(``public_id`` = the access key id, ``secret`` = ``v1:plain:<secret access key>``). A request whose
``Authorization`` is ``AWS4-HMAC-SHA256 Credential=<akid>/<date>/<region>/<service>/aws4_request,
SignedHeaders=..., Signature=<hex>`` is verified by recomputing the signature with botocore's own
SigV4 signer over the request as received (method, raw path, query, the signed headers, and the
SHA-256 of the body) and comparing in constant time. An ``x-amz-content-sha256`` header must equal
the body's SHA-256 (``UNSIGNED-PAYLOAD`` is refused). ``x-amz-date`` must be within
:data:`MAX_SKEW_S` of the clock and match the credential scope's date.

An unknown access key id is verified against a throwaway secret, so it costs the same time and
fails the same way as a bad signature.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from calendar import timegm
from collections.abc import Mapping
from dataclasses import dataclass
from time import strptime
from typing import TYPE_CHECKING

from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]

from busbar.auth.identity import Identity

if TYPE_CHECKING:
    from busbar.store.sync import KeySync

__all__ = ["KIND", "MAX_SKEW_S", "SCHEME", "SignedRequest", "SigV4Verifier", "is_sigv4"]

SCHEME = "AWS4-HMAC-SHA256"
KIND = "sigv4"
MAX_SKEW_S = 900
_SECRET_PREFIX = "v1:plain:"
_AUTH = re.compile(r"AWS4-HMAC-SHA256\s+Credential=([A-Za-z0-9]{1,128})/(\d{8})/([a-z0-9-]{1,32})/([a-z0-9-]{1,64})"
                   r"/aws4_request,\s*SignedHeaders=([a-z0-9;._-]{1,2048}),\s*Signature=([0-9a-f]{64})")
_DECOY = secrets.token_urlsafe(30)


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """A request as received: ``method``, ``raw_path`` (percent-encoded, as on the wire), ``query``
    (the raw query string), lower-cased ``headers``, and the body bytes as received."""

    method: str
    raw_path: str
    query: str
    headers: Mapping[str, str]
    body: bytes


def is_sigv4(headers: Mapping[str, str]) -> bool:
    """Whether the request carries an AWS SigV4 ``Authorization`` header."""
    return headers.get("authorization", "").startswith(SCHEME)


def _expected(req: SignedRequest, akid: str, secret: str, region: str, service: str, signed: list[str],
              amz_date: str) -> str:
    headers = {name: req.headers.get(name, "") for name in signed}
    url = f"http://{req.headers.get('host', '')}{req.raw_path}" + (f"?{req.query}" if req.query else "")
    aws = AWSRequest(method=req.method, url=url, headers=headers, data=req.body)
    aws.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(akid, secret), service, region)
    canonical = signer.canonical_request(aws)
    return str(signer.signature(signer.string_to_sign(aws, canonical), aws))


def _unix(amz_date: str) -> int:
    """``20260102T030405Z`` -> Unix seconds (an impossible date: 0, far outside any skew window)."""
    try:
        return timegm(strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        return 0


class SigV4Verifier:
    """Verify SigV4-signed requests against the ``sigv4`` credentials of the store mirror.

    Args:
        keysync: the store mirror (``credentials[("sigv4", akid)]``, ``live_key(id, now)``).
    """

    def __init__(self, keysync: KeySync) -> None:
        self.keysync = keysync

    def identify(self, req: SignedRequest, now: int) -> Identity | None:
        """The owning key's :class:`Identity` when the signature verifies, else ``None``."""
        m = _AUTH.fullmatch(req.headers.get("authorization", "").strip())
        amz_date = req.headers.get("x-amz-date", "")
        if m is None or not re.fullmatch(r"\d{8}T\d{6}Z", amz_date):
            return None
        akid, day, region, service, signed_s, signature = m.groups()
        signed = signed_s.split(";")
        cred = self.keysync.credentials.get((KIND, akid))
        secret = cred.secret.removeprefix(_SECRET_PREFIX) if cred is not None else _DECOY
        ok = hmac.compare_digest(_expected(req, akid, secret, region, service, signed, amz_date), signature)
        body_hash = req.headers.get("x-amz-content-sha256")
        if body_hash is not None and not hmac.compare_digest(body_hash, hashlib.sha256(req.body).hexdigest()):
            ok = False
        if "host" not in signed or amz_date[:8] != day or abs(now - _unix(amz_date)) > MAX_SKEW_S:
            ok = False
        if not ok or cred is None or not cred.meta.is_live(now) or not cred.secret.startswith(_SECRET_PREFIX):
            return None
        key = self.keysync.live_key(cred.meta.key_id, now)
        if key is None:
            return None
        pools = None if key.allowed_pools is None else frozenset(key.allowed_pools)
        return Identity(key.id, "keys", key.group, pools, dict(key.labels), frozenset(), "sigv4")
