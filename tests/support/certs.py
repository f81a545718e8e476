"""Certificates made at test time: a CA and leaf certificates it signs (``cryptography``).

``make_ca(dir) -> CA``; ``ca.issue(dir, name, hosts=("127.0.0.1", "localhost"), client=False) -> Leaf``
writes ``<name>.crt`` / ``<name>.key`` (PEM, PKCS#8, unencrypted) and returns their paths. The CA's
PEM is ``ca.cert_path``. Keys are EC P-256; validity is one day from now. ``pem_bundle()``: a
certificate and its key in one PEM text, for fake secret readers.
"""
from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Leaf:
    """A certificate and its key on disk."""

    cert_path: Path
    key_path: Path


@dataclass(frozen=True)
class CA:
    """A self-signed test CA."""

    cert_path: Path
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def issue(self, directory: Path, name: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
              *, client: bool = False) -> Leaf:
        """Sign a server (or, with ``client``, a client) certificate for ``hosts``."""
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                .issuer_name(self.cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(self.key, hashes.SHA256()))
        return _write(directory, name, cert, key)


def make_ca(directory: Path, name: str = "busbar-test-ca") -> CA:
    """Create a self-signed CA in ``directory`` (``<name>.crt``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    leaf = _write(directory, name, cert, key)
    return CA(leaf.cert_path, key, cert)


def _write(directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Leaf:
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return Leaf(cert_path, key_path)


@functools.cache
def pem_bundle() -> str:
    """One PEM text holding a leaf certificate *and* its PKCS#8 key (made once per test run), for a
    fake secret reader that serves every ``tls.cert`` / ``tls.key`` / ``tls.client_ca`` file."""
    with tempfile.TemporaryDirectory() as tmp:
        leaf = make_ca(Path(tmp)).issue(Path(tmp), "bundle")
        return leaf.cert_path.read_text() + leaf.key_path.read_text()
