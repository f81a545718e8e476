"""ed25519 key handling, signing and verification of manifests. Pure functions of bytes.

Keys travel as hex: a private key is its 32-byte *seed* (64 hex, ``BUSBAR_SIGN_KEY``), a public
key is its raw 32 bytes (64 hex, ``plugins.trust.publishers[].public_key``), a signature is 64
bytes (128 hex, ``manifest.signature``).

"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from busbar_sdk._errors import SigningError
from busbar_sdk._manifest import canonical_manifest_bytes

__all__ = ["generate_signing_key", "public_key_from_seed", "sign_manifest", "verify_manifest_signature"]

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


def _key_bytes(hex_text: str, what: str) -> bytes:
    text = hex_text.strip()
    if not _HEX64.match(text):
        raise SigningError(f"{what} must be 64 hex digits (32 bytes), got {len(text)} characters")
    return bytes.fromhex(text)


def generate_signing_key() -> tuple[str, str]:
    """A fresh keypair as ``(private_seed_hex, public_key_hex)``, 64 lowercase hex each."""
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    pub = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return seed.hex(), pub.hex()


def public_key_from_seed(seed_hex: str) -> str:
    """The 64-hex public key of a 64-hex private seed.

    Raises:
        SigningError: the seed is not 64 hex digits.
    """
    key = Ed25519PrivateKey.from_private_bytes(_key_bytes(seed_hex, "the signing key"))
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def sign_manifest(manifest: Mapping[str, Any], seed_hex: str) -> str:
    """Sign ``canonical_manifest_bytes(manifest)``; returns the 128-hex signature.

    Raises:
        SigningError: the seed is malformed.
        ArtifactError: the manifest cannot be canonicalized.
    """
    key = Ed25519PrivateKey.from_private_bytes(_key_bytes(seed_hex, "the signing key"))
    return key.sign(canonical_manifest_bytes(manifest)).hex()


def verify_manifest_signature(manifest: Mapping[str, Any], public_key: str | bytes) -> bool:
    """True when ``manifest["signature"]`` is a valid ed25519 signature by ``public_key`` over the
    canonical bytes. An empty or malformed signature is simply ``False``.

    Args:
        manifest: the raw parsed ``manifest.json`` object.
        public_key: 64 hex digits or 32 raw bytes.

    Raises:
        SigningError: the public key itself is malformed (a configuration fault, not a verdict).
    """
    raw = public_key if isinstance(public_key, bytes) else _key_bytes(public_key, "the public key")
    if len(raw) != 32:
        raise SigningError(f"the public key must be 32 bytes, got {len(raw)}")
    sig_hex = manifest.get("signature", "")
    if not isinstance(sig_hex, str) or len(sig_hex) != 128:
        return False
    try:
        sig = bytes.fromhex(sig_hex)
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, canonical_manifest_bytes(manifest))
    except (ValueError, InvalidSignature):
        return False
    return True
