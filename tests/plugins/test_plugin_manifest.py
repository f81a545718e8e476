"""Manifest schema, canonical signing bytes (against docs/plugin-format.md's test vector), ed25519,
strict semver, and the ``plugins:`` config block.

Source: docs/plugins.md; docs/plugin-format.md.
"""
from __future__ import annotations

import hashlib
import json
import re

import pytest
from busbar.config.schema_plugins import PluginsConfig
from busbar_sdk.artifact import (
    ArtifactError,
    SigningError,
    canonical_manifest_bytes,
    parse_manifest_bytes,
    parse_semver,
    public_key_from_seed,
    sign_manifest,
    verify_manifest_signature,
)
from pydantic import ValidationError

from tests.plugins.helpers import REPO

DOC = (REPO / "docs" / "plugin-format.md").read_text("utf-8")


def _doc_value(label: str) -> str:
    m = re.search(rf"{re.escape(label)}: `([0-9a-f]+)`", DOC)
    assert m, label
    return m.group(1)


def test_docs_test_vector_reproduces() -> None:
    manifest_src = DOC.split("```json\n", 1)[1].split("```", 1)[0]
    canonical_hex = DOC.split("Canonical bytes (432 bytes, hex):\n\n```\n", 1)[1].split("\n```", 1)[0]
    manifest, obj = parse_manifest_bytes(manifest_src.encode())
    assert manifest.needs.prompt == "ro" and "\u2028" in manifest.description
    canonical = canonical_manifest_bytes(obj)
    assert canonical.hex() == canonical_hex and len(canonical) == 432
    assert hashlib.sha256(canonical).hexdigest() == _doc_value("SHA-256 of the canonical bytes")
    seed = _doc_value("Private seed (do not use for anything else)")
    assert public_key_from_seed(seed) == _doc_value("Public key")
    assert sign_manifest(obj, seed) == _doc_value("Signature")  # ed25519 is deterministic
    signed = dict(obj, signature=_doc_value("Signature"))
    assert verify_manifest_signature(signed, _doc_value("Public key"))


def test_canonical_bytes_rules() -> None:
    obj = {"b": 1, "a": {"z": "</>&\u2028/\x01\n", "y": "é"}, "signature": "ff"}
    assert canonical_manifest_bytes(obj) == '{"a":{"y":"é","z":"</>&\u2028/\\u0001\\n"},"b":1}'.encode()
    with pytest.raises(ArtifactError, match="cannot be canonicalized"):
        canonical_manifest_bytes({"x": "\ud800"})


GOOD = {"name": "acme-x", "alias": "x", "kind": "hook", "version": "1.0.0", "publisher": "acme",
        "abi_version": 1, "sha256": "0" * 64, "signature": ""}


@pytest.mark.parametrize(("raw", "reason"), [
    (b'{"name": "a", "name": "b"}', ("manifest.json: duplicate key 'name' (a verifier in another language could read "
                                    "the other value); repack the plugin")),
    (b"\xef\xbb\xbf{}", "manifest.json starts with a UTF-8 byte-order mark; write it without one"),
    (b"[1]", "manifest.json must hold one JSON object"),
    (b'{"abi_version": NaN}', "manifest.json: NaN is not JSON; repack the plugin"),
    (json.dumps(GOOD | {"abi_version": 1.0}).encode(),
     "manifest.json: the number 1.0 is not an integer; no manifest field is fractional"),
    (json.dumps(GOOD | {"abi_version": True}).encode(), "manifest.json: field 'abi_version': Input should be a valid integer"),
    (json.dumps(GOOD | {"settings_schema": None}).encode(),
     "manifest.json: field 'settings_schema': must be a JSON Schema string, or absent (never null)"),
    (json.dumps(GOOD | {"settings_schema": '{"$schema": "http://json-schema.org/draft-07/schema#"}'}).encode(),
     "manifest.json: field 'settings_schema': $schema must be 'https://json-schema.org/draft/2020-12/schema'"),
    (json.dumps(GOOD | {"needs": {"prompt": "rw", "user": "rw"}}).encode(),
     "manifest.json: field 'needs.user': Input should be 'no' or 'ro'"),
    (json.dumps(GOOD | {"sha256": "A" * 64}).encode(),
     "manifest.json: field 'sha256': must be the lowercase 64-hex SHA-256 of the wheel"),
    (json.dumps(GOOD | {"publisher": "-acme"}).encode(),
     ("manifest.json: field 'publisher': '-acme' is not allowed; use 1-64 lowercase letters, digits and inner dashes "
     "([a-z0-9-]+, no leading or trailing dash)")),
], ids=["duplicate-key", "bom", "not-object", "nan", "float", "bool-int", "null-schema", "schema-dialect",
        "needs-user-rw", "sha-upper", "publisher-dash"])
def test_strict_manifest_parsing(raw: bytes, reason: str) -> None:
    with pytest.raises(ArtifactError) as err:
        parse_manifest_bytes(raw)
    assert err.value.reason == reason


def test_defaults_are_not_added_to_the_signed_bytes() -> None:
    manifest, obj = parse_manifest_bytes(json.dumps(GOOD).encode())
    assert manifest.description == "" and manifest.needs.prompt == "no"
    assert b"description" not in canonical_manifest_bytes(obj)


def test_sign_and_verify() -> None:
    seed = "11" * 32
    pub = public_key_from_seed(seed)
    m = dict(GOOD)
    m["signature"] = sign_manifest(m, seed)
    assert verify_manifest_signature(m, pub) and verify_manifest_signature(m, bytes.fromhex(pub))
    assert not verify_manifest_signature(m | {"version": "1.0.1"}, pub)
    assert not verify_manifest_signature(m | {"signature": ""}, pub)
    assert not verify_manifest_signature(m, public_key_from_seed("22" * 32))
    with pytest.raises(SigningError, match="must be 64 hex digits"):
        sign_manifest(m, "abc")
    with pytest.raises(SigningError, match="the public key must be 64 hex digits"):
        verify_manifest_signature(m, "zz")


@pytest.mark.parametrize(("lower", "higher"), [
    ("1.0.0", "1.0.1"), ("1.9.0", "1.10.0"), ("1.0.0-rc.1", "1.0.0"), ("1.0.0-alpha", "1.0.0-alpha.1"),
    ("1.0.0-alpha.beta", "1.0.0-beta"), ("1.0.0-beta.2", "1.0.0-beta.11"), ("1.0.0-rc.1", "1.0.0-rc.1.1"),
])
def test_semver_precedence(lower: str, higher: str) -> None:
    a, b = parse_semver(lower), parse_semver(higher)
    assert a is not None and b is not None and a.key() < b.key()


@pytest.mark.parametrize("bad", ["v1.0.0", "1.0", "01.0.0", "1.0.0-", "1.0.0+", ""])
def test_semver_rejects(bad: str) -> None:
    assert parse_semver(bad) is None


def test_semver_build_metadata_is_ignored_for_precedence() -> None:
    assert parse_semver("1.0.0+a").key() == parse_semver("1.0.0+b").key()  # type: ignore[union-attr]


# ------------------------------------------------------------------------------ the config block

def test_plugins_config_defaults() -> None:
    cfg = PluginsConfig()
    assert (cfg.enabled, cfg.dir, cfg.trust.publishers, cfg.trust.allow_unsigned, cfg.trust.allow_third_party,
            cfg.min_versions) == (False, "plugins", (), False, False, {})


@pytest.mark.parametrize(("block", "message"), [
    ({"trust": {"publishers": [{"name": "busbar", "public_key": "ab" * 32}]}},
     "the publisher name 'busbar' is reserved for the release key embedded in the kernel"),
    ({"trust": {"publishers": [{"name": "acme", "public_key": "abc"}]}},
     "must be a 64-hex ed25519 public key (32 bytes), got 3 characters"),
    ({"trust": {"publishers": [{"name": "Acme Inc", "public_key": "ab" * 32}]}}, "is not a valid publisher name"),
    ({"trust": {"publishers": [{"name": "acme", "public_key": "ab" * 32}] * 2}}, "publisher 'acme' is listed twice"),
    ({"min_versions": {"acme-x": "v1.6.0"}}, ("acme-x: 'v1.6.0' is not a strict semver MAJOR.MINOR.PATCH version; "
                                             "write '1.6.0'")),
    ({"trust": {"allow_unsigned": True, "allow_unsignd": True}}, "Extra inputs are not permitted"),
    ({"enable": True}, "Extra inputs are not permitted"),
], ids=["reserved-busbar", "short-key", "bad-name", "duplicate", "v-prefixed-floor", "typo-trust", "typo-top"])
def test_plugins_config_faults(block: dict, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        PluginsConfig.model_validate(block)
    assert message in str(err.value)


def test_publisher_keys_are_normalized_to_lowercase() -> None:
    cfg = PluginsConfig.model_validate({"trust": {"publishers": [{"name": "acme", "public_key": "AB" * 32}]}})
    assert cfg.trust.key_for("acme") == "ab" * 32 and cfg.trust.key_for("zeta") is None
