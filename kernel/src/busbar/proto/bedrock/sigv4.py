"""AWS SigV4 for Bedrock egress, signed per request with botocore's signer (never hand-rolled).

Credential format (docs/protocols/README.md): the provider's ``api_key``
resolves to ``ACCESS_KEY_ID:SECRET_ACCESS_KEY`` or ``ACCESS_KEY_ID:SECRET_ACCESS_KEY:SESSION_TOKEN``.
Service name ``bedrock``; region parsed from the host (``bedrock-runtime.<region>.amazonaws.com``,
also ``-fips`` and VPC-endpoint hosts), ``us-east-1`` for any other host (a local mock).

"Signed == sent" (case C033): the URL passed in is exactly the one on the wire — its path
already percent-encodes the model id as one segment (``:`` -> ``%3A``, ``/`` -> ``%2F``).
botocore builds the canonical URI by encoding each segment once more (``%3A`` -> ``%253A``), as
non-S3 services require, and signs ``host``, ``x-amz-date``, ``x-amz-security-token`` (when a
session token is given) and the request's other headers. The caller must send exactly the
returned headers (no other header whose value could differ).

Source: docs/protocols/bedrock.md#egress-and-sigv4-c033; docs/protocols/README.md.
case C033.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]

SERVICE = "bedrock"
DEFAULT_REGION = "us-east-1"
_REGION = re.compile(
    r"(?:^|\.)bedrock(?:-runtime|-agent-runtime)?(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\."
    r"(?:vpce\.)?amazonaws\.com(?:\.cn)?$"
)


class CredentialFormatError(ValueError):
    """The resolved credential is not ``ACCESS:SECRET`` or ``ACCESS:SECRET:SESSION`` (no value echoed)."""


def parse_credentials(api_key: str) -> Credentials:
    """``ACCESS:SECRET[:SESSION]`` -> botocore ``Credentials``.

    Raises:
        CredentialFormatError: fewer than two non-empty fields.
    """
    parts = api_key.strip().split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise CredentialFormatError(
            "bedrock credential must be ACCESS_KEY_ID:SECRET_ACCESS_KEY or "
            "ACCESS_KEY_ID:SECRET_ACCESS_KEY:SESSION_TOKEN"
        )
    return Credentials(parts[0], parts[1], parts[2] if len(parts) == 3 and parts[2] else None)


def region_of(url: str) -> str:
    """The AWS region named by a Bedrock host, else ``us-east-1``."""
    host = (urlsplit(url).hostname or "").lower()
    m = _REGION.search(host)
    return m.group(1) if m else DEFAULT_REGION


def sign(
    url: str, body: bytes, headers: dict[str, str], api_key: str, region: str | None = None
) -> dict[str, str]:
    """Headers for one signed ``POST url`` with ``body``: ``headers`` plus ``authorization``,
    ``x-amz-date`` (and ``x-amz-security-token``), all lower-case names.

    Args:
        url: the absolute URL exactly as it will be sent.
        body: the exact body bytes (hashed into the signature).
        headers: the other headers to send (signed too).
        api_key: ``ACCESS:SECRET[:SESSION]``.
        region: override the region parsed from the host.

    Raises:
        CredentialFormatError: see ``parse_credentials``.
    """
    creds = parse_credentials(api_key)
    req = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(creds, SERVICE, region or region_of(url)).add_auth(req)
    return {k.lower(): v for k, v in req.headers.items()}
