"""The artifact format, for tools: manifest schema, canonical signing bytes, signing, the
structural validation, wheel inspection and safe extraction, packing.

The kernel's loader and ``busbar-plugin-pack`` both import from here; this is the one definition
of the format (docs/plugin-format.md describes it for other languages).

One owner for shared logic; the format is docs/plugin-format.md.
"""
from __future__ import annotations

from busbar_sdk._archive import (
                                  MANIFEST_MEMBER,
                                  Artifact,
                                  SignedParts,
                                  complete_artifact,
                                  read_artifact,
                                  read_signed_parts,
                                  wheel_sha256,
                                  write_artifact,
)
from busbar_sdk._binding import PluginBinding, bind_plugin
from busbar_sdk._errors import ArtifactError, BuildError, HostileArchiveError, SigningError
from busbar_sdk._importer import OwnedModules, PluginImporter, environment_provides
from busbar_sdk._limits import DEFAULT_LIMITS, Limits
from busbar_sdk._manifest import (
                                  MANIFEST_MAX_BYTES,
                                  NAME_PATTERN,
                                  Manifest,
                                  Needs,
                                  canonical_manifest_bytes,
                                  is_valid_name,
                                  manifest_json_bytes,
                                  parse_manifest_bytes,
)
from busbar_sdk._pack import build_wheel, build_wheels, pack_artifact
from busbar_sdk._requirements import unmet_requirements
from busbar_sdk._semver import SemVer, parse_semver
from busbar_sdk._signing import (
                                  generate_signing_key,
                                  public_key_from_seed,
                                  sign_manifest,
                                  verify_manifest_signature,
)
from busbar_sdk._versions import (
                                  ENTRY_POINT_GROUP,
                                  KINDS,
                                  RESERVED_PUBLISHER,
                                  SUPPORTED_ABI_VERSIONS,
                                  TRANSPORT_VERSION,
)
from busbar_sdk._wheel import WheelInfo, extract_wheel, inspect_wheel

__all__ = [
                                  "DEFAULT_LIMITS",
                                  "ENTRY_POINT_GROUP",
                                  "KINDS",
                                  "MANIFEST_MAX_BYTES",
                                  "MANIFEST_MEMBER",
                                  "NAME_PATTERN",
                                  "RESERVED_PUBLISHER",
                                  "SUPPORTED_ABI_VERSIONS",
                                  "TRANSPORT_VERSION",
                                  "Artifact",
                                  "ArtifactError",
                                  "BuildError",
                                  "HostileArchiveError",
                                  "Limits",
                                  "Manifest",
                                  "Needs",
                                  "OwnedModules",
                                  "PluginBinding",
                                  "PluginImporter",
                                  "SemVer",
                                  "SignedParts",
                                  "SigningError",
                                  "WheelInfo",
                                  "bind_plugin",
                                  "build_wheel",
                                  "build_wheels",
                                  "canonical_manifest_bytes",
                                  "complete_artifact",
                                  "environment_provides",
                                  "extract_wheel",
                                  "generate_signing_key",
                                  "inspect_wheel",
                                  "is_valid_name",
                                  "manifest_json_bytes",
                                  "pack_artifact",
                                  "parse_manifest_bytes",
                                  "parse_semver",
                                  "public_key_from_seed",
                                  "read_artifact",
                                  "read_signed_parts",
                                  "sign_manifest",
                                  "unmet_requirements",
                                  "verify_manifest_signature",
                                  "wheel_sha256",
                                  "write_artifact",
]
