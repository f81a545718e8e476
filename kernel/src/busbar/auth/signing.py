"""The signing keyring: the ed25519 keys that sign and verify ``bbk_`` virtual keys (docs/auth.md#signing-key).

Where the key comes from (:func:`load_keyring`), first match wins:

1. ``auth.signing_key`` (a secret reference): fleet-shared by construction, every node resolves the
   same secret.
2. No ``signing_key`` and a durable ``store.module``: the store's meta entry ``auth.signing_key``;
   the first node to boot generates it (``put_meta(..., only_if_absent=True)``), every other node of
   the fleet reads the same value.
3. No ``signing_key`` and the ``memory`` store (a single node): the file ``busbar-signing.key`` next
   to config.yaml, generated with mode 0600 on first boot and reused afterwards.

The key text is one or more PEM blocks: the first ``PRIVATE KEY`` signs; every block (private or
``PUBLIC KEY``) verifies. Rotation without revoking outstanding keys is therefore "put the new key
first and keep the old one's public key after it until its tokens expire" (:func:`rotated_text`).
A bare base64/base64url 32-byte ed25519 seed is accepted as a single signing key.

Key id (``kid``): ``k`` + the first 10 base64url characters of SHA-256 over the raw public key.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

if TYPE_CHECKING:
    from busbar_sdk.store import Store

__all__ = ["GENERATED_FILE", "STORE_META", "Keyring", "SigningKeyError", "generate_text", "keyring_from_text",
           "kid_of", "load_keyring", "rotated_text"]

GENERATED_FILE = "busbar-signing.key"
"""The generated key's file name, next to config.yaml (single node, memory store)."""
STORE_META = "auth.signing_key"
"""The store meta entry holding a fleet's generated key (durable store, no ``auth.signing_key``)."""

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----", re.S)


class SigningKeyError(Exception):
    """The signing key text is unusable; ``str(e)`` is one operator-facing line (never key material)."""


def kid_of(public: Ed25519PublicKey) -> str:
    """The key id of ``public``: ``k`` + 10 base64url characters of SHA-256(raw public key)."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "k" + base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).decode()[:10]


@dataclass(frozen=True, slots=True)
class Keyring:
    """The active signing key plus every public key tokens may verify against.

    Attributes:
        kid: the active key's id (stamped into newly minted tokens).
        private: the active ed25519 private key.
        public: kid -> public key, the active one included.
        source: where the keys came from: ``auth.signing_key``, ``store``, or ``file:<path>``.
    """

    kid: str
    private: Ed25519PrivateKey = field(repr=False)
    public: dict[str, Ed25519PublicKey] = field(repr=False)
    source: str

    def sign(self, data: bytes) -> bytes:
        """The 64-byte ed25519 signature of ``data`` with the active key."""
        return self.private.sign(data)

    def check(self, kid: str, signature: bytes, data: bytes) -> bool:
        """Whether ``signature`` over ``data`` verifies with the key ``kid`` (unknown kid: False)."""
        key = self.public.get(kid)
        if key is None:
            return False
        try:
            key.verify(signature, data)
        except InvalidSignature:
            return False
        return True

    @property
    def public_key_b64(self) -> str:
        """The active raw 32-byte public key, base64url without padding (safe to show)."""
        raw = self.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    def public_pem(self) -> str:
        """The active public key as PEM (safe to show: the admin API's ``signing-key`` info)."""
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def _private_pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def generate_text() -> str:
    """A new ed25519 private key as PKCS#8 PEM text."""
    return _private_pem(Ed25519PrivateKey.generate())


def keyring_from_text(text: str, source: str) -> Keyring:
    """Parse key text (see the module doc) into a :class:`Keyring`.

    Raises:
        SigningKeyError: no ed25519 private key, a block that is not ed25519, or garbage.
    """
    blocks = [m.group(0) for m in _PEM_BLOCK.finditer(text)]
    private: Ed25519PrivateKey | None = None
    public: dict[str, Ed25519PublicKey] = {}
    if not blocks:
        private = _seed(text.strip(), source)
        public[kid_of(private.public_key())] = private.public_key()
    for block in blocks:
        label = block.split("-----")[1].removeprefix("BEGIN ")
        if label not in ("PRIVATE KEY", "PUBLIC KEY"):
            raise SigningKeyError(f"{source}: holds a {label} block; the signing key is an ed25519 PRIVATE KEY "
                                  f"(generate one with 'openssl genpkey -algorithm ed25519')")
        try:
            if label == "PRIVATE KEY":
                key = serialization.load_pem_private_key(block.encode(), password=None)
                if not isinstance(key, Ed25519PrivateKey):
                    raise SigningKeyError(f"{source}: a private key is not ed25519; busbar signs keys with ed25519")
                private = private or key
                pub = key.public_key()
            else:
                loaded = serialization.load_pem_public_key(block.encode())
                if not isinstance(loaded, Ed25519PublicKey):
                    raise SigningKeyError(f"{source}: a public key is not ed25519; busbar verifies with ed25519")
                pub = loaded
        except (ValueError, TypeError) as e:
            raise SigningKeyError(f"{source}: a PEM block does not parse as a key ({type(e).__name__}); "
                                  f"generate one with 'openssl genpkey -algorithm ed25519'") from None
        public.setdefault(kid_of(pub), pub)
    if private is None:
        raise SigningKeyError(f"{source}: holds no ed25519 PRIVATE KEY block; the first private key signs")
    return Keyring(kid_of(private.public_key()), private, public, source)


def _seed(text: str, source: str) -> Ed25519PrivateKey:
    try:
        raw = base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "=" * (-len(text) % 4))
    except ValueError:
        raw = b""
    if len(raw) != 32 or not re.fullmatch(r"[A-Za-z0-9+/_=-]+", text):
        raise SigningKeyError(f"{source}: is neither PEM nor a base64 32-byte ed25519 seed; generate one with "
                              f"'openssl genpkey -algorithm ed25519'")
    return Ed25519PrivateKey.from_private_bytes(raw)


def rotated_text(text: str) -> str:
    """Key text with a new signing key first and every old key kept as a verify-only public key.

    Raises:
        SigningKeyError: ``text`` does not parse.
    """
    ring = keyring_from_text(text, "signing key")
    olds = [k.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
            for k in ring.public.values()]
    return generate_text() + "".join(olds)


def _file_text(path: Path) -> str:
    """Read ``path``, creating it (0600) with a new key when absent.

    The key is written to a private temporary file first and hard-linked into place, which fails if
    the file already exists: processes racing on first boot (``--workers``) all end up reading the
    one complete file, never a half-written one.
    """
    if not path.exists():
        fd, tmp = tempfile.mkstemp(prefix=".busbar-signing-", dir=path.parent)   # mode 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(generate_text())
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return path.read_text("ascii")


async def load_keyring(secret_text: str | None, *, config_path: Path, store: Store | None) -> Keyring:
    """The keyring for this node (module doc: secret, then store meta, then the file next to config.yaml).

    Args:
        secret_text: ``auth.signing_key`` resolved, or ``None`` when the key is not configured.
        config_path: config.yaml's path (the generated file goes in its directory).
        store: the opened store when it is durable (shared by a fleet); ``None`` for the memory store.

    Raises:
        SigningKeyError: the key text does not parse, or the generated file cannot be read/written.
        busbar_sdk.store.StoreError: the store failed.
    """
    if secret_text is not None:
        return keyring_from_text(secret_text, "auth.signing_key")
    if store is not None:
        text = await store.put_meta(STORE_META, generate_text(), only_if_absent=True)
        return keyring_from_text(text, "store")
    path = config_path.resolve().parent / GENERATED_FILE
    try:
        text = _file_text(path)
    except OSError as e:
        raise SigningKeyError(f"auth.signing_key: absent, and the generated key file {path} cannot be "
                              f"read or written ({e.strerror}); set auth.signing_key or fix the "
                              f"directory's permissions") from None
    return keyring_from_text(text, f"file:{path}")
