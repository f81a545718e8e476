"""The plugin manifest: its schema and its canonical signing bytes. The one definition.

Both the signer (``busbar-plugin-pack``) and the verifier (the kernel's loader) import these
functions, so they cannot drift. The canonicalization is specified for other languages in
``docs/plugin-format.md``; in short: parse ``manifest.json`` strictly, drop the ``signature`` key,
and serialize the remaining object as sorted-key compact JSON in UTF-8.

Nothing here does I/O or trusts anything; parse errors raise :class:`ArtifactError`.

Source: docs/plugins.md.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, field_validator

from busbar_sdk._errors import ArtifactError
from busbar_sdk._semver import parse_semver
from busbar_sdk._versions import KINDS, SUPPORTED_ABI_VERSIONS, Kind
from busbar_sdk.settings_schema import settings_rules
from busbar_sdk.versions import NAME_PATTERN, is_valid_name

__all__ = [
    "MANIFEST_MAX_BYTES",
    "NAME_PATTERN",
    "Manifest",
    "Needs",
    "canonical_manifest_bytes",
    "describe_validation_error",
    "is_valid_name",
    "manifest_json_bytes",
    "parse_manifest_bytes",
]

#: Names, aliases and publishers: lowercase ASCII letters, digits, inner dashes; 1..64 chars.
_NAME = re.compile(NAME_PATTERN)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SIG = re.compile(r"^(?:[0-9a-f]{128})?$")
_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
MANIFEST_MAX_BYTES = 1 << 20
_TEXT_MAX = 4096


class Needs(BaseModel):
    """The maximum grant the plugin may receive (docs/plugins.md#grants).

    The kernel projects per ``min(needs, operator grant)`` on the ladder ``no < ro < rw``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    prompt: Literal["no", "ro", "rw"] = "no"
    user: Literal["no", "ro"] = "no"


class Manifest(BaseModel):
    """A plugin's signed identity (``manifest.json``). Unknown fields are refused.

    Attributes:
        name: canonical id, ``[a-z0-9-]+`` (e.g. ``busbar-webrequest-hook``).
        alias: short config name, same charset (e.g. ``webrequest``).
        kind: ``hook`` | ``store`` | ``secret`` | ``auth``.
        version: strict semver.
        publisher: who signed it; ``busbar`` = first-party, verified only with the embedded key.
        abi_version: per-kind payload version (``HOOK_ABI_VERSION = 1``).
        sha256: lowercase 64-hex SHA-256 of the wheel member's bytes.
        signature: lowercase 128-hex ed25519 signature over the canonical bytes; ``""`` = unsigned.
        description, homepage, license: display strings (signed); default ``""``.
        needs: :class:`Needs`; default ``{prompt: no, user: no}``.
        settings_schema: optional JSON Schema (2020-12) document *as a string*; absent, not null.
        requires_dist: the wheel's ``Requires-Dist`` lines (PEP 508), checked against the
            kernel's environment at load; the wheel is never pip-installed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: StrictStr
    alias: StrictStr
    kind: Kind
    version: StrictStr
    publisher: StrictStr
    abi_version: StrictInt
    sha256: StrictStr
    signature: StrictStr
    description: StrictStr = ""
    homepage: StrictStr = ""
    license: StrictStr = ""
    needs: Needs = Field(default_factory=Needs)
    settings_schema: StrictStr | None = None
    requires_dist: tuple[StrictStr, ...] = ()

    @field_validator("name", "alias", "publisher")
    @classmethod
    def _names(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r} is not allowed; use 1-64 lowercase letters, digits and inner dashes "
                             f"([a-z0-9-]+, no leading or trailing dash)")
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if parse_semver(v) is None:
            raise ValueError(f"{v!r} is not a strict semver version (MAJOR.MINOR.PATCH[-pre][+build])")
        return v

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        if not _SHA256.match(v):
            raise ValueError("must be the lowercase 64-hex SHA-256 of the wheel")
        return v

    @field_validator("signature")
    @classmethod
    def _sig(cls, v: str) -> str:
        if not _SIG.match(v):
            raise ValueError("must be a lowercase 128-hex ed25519 signature, or \"\" for unsigned")
        return v

    @field_validator("description", "homepage", "license")
    @classmethod
    def _text(cls, v: str) -> str:
        if len(v) > _TEXT_MAX:
            raise ValueError(f"is {len(v)} characters; the limit is {_TEXT_MAX}")
        return v

    @field_validator("settings_schema")
    @classmethod
    def _schema(cls, v: str | None) -> str | None:
        if v is None:
            raise ValueError("must be a JSON Schema string, or absent (never null)")
        try:
            doc = json.loads(v)
        except ValueError as exc:
            raise ValueError(f"is not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise ValueError("must be a JSON Schema object")  # noqa: TRY004 - pydantic validators raise ValueError
        if "$schema" in doc and doc["$schema"] != _SCHEMA_DIALECT:
            raise ValueError(f"$schema must be {_SCHEMA_DIALECT!r}")
        settings_rules(doc)            # the Busbar keywords (x-busbar-egress-url, ...) used as documented
        return v

    def supports_abi(self, supported: Mapping[str, tuple[int, int]] = SUPPORTED_ABI_VERSIONS) -> bool:
        """True when ``abi_version`` lies in the inclusive range supported for ``kind``."""
        lo, hi = supported.get(self.kind, (1, 0))
        return lo <= self.abi_version <= hi

    def to_dict(self) -> dict[str, Any]:
        """The manifest as a JSON object: every field present except an absent ``settings_schema``."""
        d = self.model_dump(mode="json", exclude_none=True)
        d["requires_dist"] = list(self.requires_dist)
        return d

    def __repr__(self) -> str:
        return (f"Manifest(name={self.name!r}, alias={self.alias!r}, kind={self.kind!r}, "
                f"version={self.version!r}, publisher={self.publisher!r}, signed={bool(self.signature)})")


def canonical_manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """The exact bytes an ed25519 signature covers.

    The JSON object without its ``signature`` key, serialized with keys sorted by code point at
    every level, no insignificant whitespace (``,`` and ``:`` separators), non-ASCII characters
    literal (UTF-8), the JSON short escapes for ``"`` ``\\`` ``\\b`` ``\\f`` ``\\n`` ``\\r``
    ``\\t``, ``\\u00XX`` (lowercase hex) for other control characters, ``/`` not escaped, integers
    in plain decimal. See docs/plugin-format.md for a test vector.

    Args:
        manifest: the parsed ``manifest.json`` object (from :func:`parse_manifest_bytes`, never a
            model dump, so defaults the signer omitted are not added) or :meth:`Manifest.to_dict`.

    Raises:
        ArtifactError: the object holds something JSON cannot carry canonically (a lone surrogate,
            a non-finite number, a non-string key).
    """
    body = {k: v for k, v in manifest.items() if k != "signature"}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise ArtifactError(f"manifest.json cannot be canonicalized: {exc}") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ArtifactError(f"manifest.json: duplicate key {k!r} (a verifier in another language "
                                f"could read the other value); repack the plugin")
        out[k] = v
    return out


def _reject_constant(name: str) -> Any:
    raise ArtifactError(f"manifest.json: {name} is not JSON; repack the plugin")


def _reject_float(text: str) -> Any:
    raise ArtifactError(f"manifest.json: the number {text} is not an integer; no manifest field is fractional")


def parse_manifest_bytes(raw: bytes) -> tuple[Manifest, dict[str, Any]]:
    """Parse ``manifest.json`` strictly and validate every field.

    Strict means: UTF-8 without BOM, one JSON object, no duplicate keys, no ``NaN``/``Infinity``,
    no fractional numbers, no unknown fields, every required field present.

    Returns:
        ``(manifest, raw_object)``; sign and verify over ``raw_object``.

    Raises:
        ArtifactError: with a one-line reason naming the field.
    """
    if len(raw) > MANIFEST_MAX_BYTES:
        raise ArtifactError(f"manifest.json is {len(raw)} bytes; the limit is {MANIFEST_MAX_BYTES}")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ArtifactError("manifest.json starts with a UTF-8 byte-order mark; write it without one")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"manifest.json is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant,
                         parse_float=_reject_float)
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"manifest.json is not valid JSON: {exc.msg} at line {exc.lineno} "
                            f"column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise ArtifactError("manifest.json must hold one JSON object")
    canonical_manifest_bytes(obj)  # refuses what cannot be canonicalized (lone surrogates)
    try:
        manifest = Manifest.model_validate(obj)
    except ValidationError as exc:
        raise ArtifactError(describe_validation_error(exc)) from None
    return manifest, obj


def describe_validation_error(exc: ValidationError) -> str:
    missing = [str(e["loc"][0]) for e in exc.errors() if e["type"] == "missing" and len(e["loc"]) == 1]
    if missing:
        return f"manifest.json is incomplete: missing field(s) {', '.join(missing)}; repack the plugin"
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"manifest.json: unknown field {field!r} (unknown fields are refused); repack the plugin"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "literal_error" and err["loc"] == ("kind",):
        msg = f"{err['input']!r} is not one of {', '.join(KINDS)}"
    return f"manifest.json: field {field!r}: {msg}"


def manifest_json_bytes(manifest: Manifest) -> bytes:
    """The ``manifest.json`` member as the packer writes it: sorted, 2-space indented, UTF-8, ``\\n``."""
    return (json.dumps(manifest.to_dict(), sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
