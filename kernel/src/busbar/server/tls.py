"""Inbound TLS for the data and admin listeners: ``tls:`` / ``admin_tls:`` into an ``ssl.SSLContext``.

``server_context(block, env, *, where="tls", module_resolver=None, read_file=None) -> ssl.SSLContext``
resolves the block's secret references (``cert``, ``key``, optional ``client_ca``) to PEM, checks each
one with ``cryptography`` and builds a server context:

- the certificate chain (leaf first) and its private key in any of the PEM forms PKCS#8
  (``PRIVATE KEY``), PKCS#1 (``RSA PRIVATE KEY``) or SEC1 (``EC PRIVATE KEY``); the key must be
  unencrypted and must match the leaf;
- TLS 1.2 or later; ALPN advertises ``http/1.1`` only;
- ``client_ca`` present: a client certificate signed by one of its CAs is **required** at the
  handshake (``ssl.CERT_REQUIRED``); a client without one is refused before any HTTP is read.

Every fault raises :class:`TlsError` with one line per fault naming the key path and, for a
``{ file: }`` reference, the file (``tls.key: /etc/busbar/key.pem is not a PEM private key ...``).
Key bytes never appear in a message or a log line. ``pem_faults`` is the same check without the
context, for ``busbar --validate`` (which prints exactly the boot's lines).

``uvicorn_ssl(ctx, handshake_timeout_s)`` is what a listener passes to ``loop.create_server``
(``ssl=``, ``ssl_handshake_timeout=``): ``limits.tls_handshake_timeout_secs`` caps each handshake
(a client that opens a connection and never finishes the handshake is cut at the deadline).

The admin listener uses the same function with ``where="admin_tls"``.

Source: docs/operations.md#tls-and-mtls, docs/config-at-a-glance.md#tls
"""
from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from busbar.config.schema_base import EnvRef, FileRef
from busbar.config.secrets import FileReader, ModuleResolver, SecretError, resolve_secret
from busbar.faults import FaultList

__all__ = ["ALPN", "TlsError", "listener_context", "pem_faults", "server_context", "uvicorn_ssl"]

ALPN = ("http/1.1",)
"""The protocols the listeners advertise in ALPN."""

_KEY_FORMS = "PKCS#8, PKCS#1 or SEC1"


class TlsError(FaultList):
    """A ``tls:`` / ``admin_tls:`` block cannot be served; ``faults``: one line each."""


def _named(ref: object) -> str:
    """What a fault calls the value: the file (``"/path/key.pem "``), the variable, or the secret."""
    if isinstance(ref, FileRef):
        return f"{ref.file} "
    if isinstance(ref, EnvRef):
        return f"environment variable {ref.env} "
    return "the resolved secret "


def _certs(text: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(text.encode("utf-8"))
    except ValueError:
        return []


def _key(text: str) -> tuple[Any, str | None]:
    """``(private key, None)`` or ``(None, why)``; the key's bytes are never part of ``why``."""
    try:
        return serialization.load_pem_private_key(text.encode("utf-8"), password=None), None
    except TypeError:
        return None, "is an encrypted private key; busbar needs it unencrypted (protect the file instead)"
    except (ValueError, UnsupportedAlgorithm):
        return None, f"is not a PEM private key ({_KEY_FORMS}); point it at the key file"


def pem_faults(values: Mapping[str, str], refs: Mapping[str, object], where: str) -> list[tuple[str, str]]:
    """The faults of resolved PEM ``values`` (``cert``, ``key``, ``client_ca``; a missing part is not
    checked).

    Args:
        values: part -> PEM text.
        refs: part -> the secret reference it came from (a ``{ file: }`` is named in the fault).
        where: ``tls`` or ``admin_tls``.

    Returns:
        ``[(key path, text)]``, e.g. ``("tls.key", "/etc/busbar/key.pem is not a PEM private key
        (PKCS#8, PKCS#1 or SEC1); point it at the key file")``; empty when the block can be served.
    """
    faults: list[tuple[str, str]] = []
    chain: list[x509.Certificate] = []
    if "cert" in values:
        chain = _certs(values["cert"])
        if not chain:
            faults.append((f"{where}.cert", f"{_named(refs['cert'])}holds no PEM certificate (-----BEGIN "
                                            f"CERTIFICATE-----); point it at the certificate chain, leaf first"))
    key = None
    if "key" in values:
        key, why = _key(values["key"])
        if why is not None:
            faults.append((f"{where}.key", f"{_named(refs['key'])}{why}"))
    if chain and key is not None and _spki(chain[0].public_key()) != _spki(key.public_key()):
        faults.append((f"{where}.key", f"{_named(refs['key'])}does not match the first certificate of "
                                       f"{where}.cert; the chain must start with this key's certificate"))
    if "client_ca" in values and not _certs(values["client_ca"]):
        faults.append((f"{where}.client_ca", f"{_named(refs['client_ca'])}holds no PEM certificate (-----BEGIN "
                                             f"CERTIFICATE-----); point it at the CA bundle that signs client "
                                             f"certificates"))
    return faults


def _spki(public_key: Any) -> bytes:
    return bytes(public_key.public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo))


def server_context(block: Any, env: Mapping[str, str], *, where: str = "tls",
                   module_resolver: ModuleResolver | None = None,
                   read_file: FileReader | None = None) -> ssl.SSLContext:
    """The server ``SSLContext`` of a ``TlsConfig`` block (see the module docstring).

    Args:
        block: a ``busbar.config.schema.TlsConfig``.
        env: environment for ``{ env: }`` references.
        where: the key path (``tls`` or ``admin_tls``) named in faults.
        module_resolver, read_file: as :func:`busbar.config.secrets.resolve_secret`.

    Raises:
        TlsError: an unresolvable reference, a file that is not PEM of the right kind, an encrypted
            key, a key that does not match the leaf certificate, or a chain OpenSSL refuses.
    """
    refs = {part: getattr(block, part) for part in ("cert", "key", "client_ca") if getattr(block, part) is not None}
    values: dict[str, str] = {}
    faults: list[str] = []
    for part, ref in refs.items():
        try:
            values[part] = resolve_secret(ref, env, where=f"{where}.{part}", module_resolver=module_resolver,
                                          read_file=read_file)
        except SecretError as e:
            faults.append(str(e))
    faults += [f"{path}: {text}" for path, text in pem_faults(values, refs, where)]
    if faults:
        raise TlsError(faults)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(list(ALPN))
    key, _ = _key(values["key"])
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    try:
        _load_chain(ctx, values["cert"].encode("utf-8"), pkcs8)
    except ssl.SSLError as e:
        raise TlsError([f"{where}.cert: {_named(refs['cert'])}cannot be loaded with its key: "
                        f"{e.reason or 'rejected by OpenSSL'}"]) from None
    if "client_ca" in values:
        try:
            ctx.load_verify_locations(cadata=values["client_ca"])
        except ssl.SSLError as e:
            raise TlsError([f"{where}.client_ca: {_named(refs['client_ca'])}cannot be loaded as a CA "
                            f"bundle: {e.reason or 'rejected by OpenSSL'}"]) from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _load_chain(ctx: ssl.SSLContext, chain: bytes, key: bytes) -> None:
    """``load_cert_chain`` reads files only: write both to a private (0700) directory, load, delete."""
    with tempfile.TemporaryDirectory(prefix="busbar-tls-") as tmp:
        cert_path, key_path = Path(tmp) / "chain.pem", Path(tmp) / "key.pem"
        cert_path.write_bytes(chain)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        ctx.load_cert_chain(cert_path, key_path)


def uvicorn_ssl(ctx: ssl.SSLContext | None, handshake_timeout_s: float) -> dict[str, Any]:
    """Keyword arguments for ``loop.create_server``: ``{"ssl": ctx, "ssl_handshake_timeout": s}`` with
    TLS, ``{}`` without (plain HTTP takes no handshake timeout)."""
    if ctx is None:
        return {}
    return {"ssl": ctx, "ssl_handshake_timeout": float(handshake_timeout_s)}


def listener_context(block: Any, where: str, env: Mapping[str, str], plugins: Any = None) -> ssl.SSLContext | None:
    """The context a listener serves with: ``None`` when ``block`` is ``None`` (plain HTTP), else
    :func:`server_context` with ``{ module: }`` references resolved through ``plugins`` (the loaded
    ``busbar.loader.PluginSet``, or ``None``). Raises :class:`TlsError`."""
    if block is None:
        return None
    resolver: ModuleResolver | None = None
    if plugins is not None:
        from busbar.loader.secrets import SecretModuleResolver

        resolver = SecretModuleResolver(plugins)
    return server_context(block, env, where=where, module_resolver=resolver)
