"""Trust: a pure function of a manifest's bytes, the policy, the release key and our version.

No I/O, no clock, no import: :func:`evaluate_trust` answers whether a structurally valid plugin may
load and, for ``--list-plugins``, what its signature verdict is. The rules (docs/plugins.md):

1. Whose key: ``publisher: busbar`` verifies only with the release key embedded in the kernel;
   another publisher with its ``plugins.trust.publishers`` key; an unknown publisher with none.
2. Floors first: a plugin whose manifest name or alias keys ``min_versions`` (the higher floor when
   both do), and every first-party plugin (floored at the kernel's own version), must prove its
   version with a *trusted* signature at or above the floor.
   No opt-in bypasses a floor.
3. Then: trusted loads; unsigned or tampered loads only under ``allow_unsigned``; a valid-looking
   signature from an unknown publisher loads only under ``allow_third_party``; otherwise the plugin
   is skipped (logged, never imported) with the reason.

Source: docs/plugins.md (trust is a pure function of bytes and policy).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from busbar_sdk.artifact import RESERVED_PUBLISHER, Manifest, parse_semver, verify_manifest_signature

from busbar.config.schema_plugins import PluginTrust

__all__ = ["Verdict", "config_floors", "evaluate_trust", "kernel_floor"]


class Verdict(NamedTuple):
    """The trust decision for one plugin.

    Attributes:
        loadable: may be imported.
        signature: the ``--list-plugins`` SIGNATURE column: ``first-party``, ``trusted``,
            ``unsigned``, ``tampered``, ``unknown-publisher``, ``no-release-key``, with
            `` (allowed)`` under an opt-in or `` (below floor)``.
        reason: why it is skipped, or which opt-in let it in; ``""`` for a plain trusted plugin.
        first_party: ``publisher == "busbar"`` and verified with the embedded release key.
        unsafe: loaded only through an opt-in (``allow_unsigned`` / ``allow_third_party``).
    """

    loadable: bool
    signature: str
    reason: str
    first_party: bool = False
    unsafe: bool = False


def kernel_floor(kernel_version: str) -> str:
    """The first-party floor for a kernel version: its ``MAJOR.MINOR.PATCH`` core."""
    m = re.match(r"^(\d+\.\d+\.\d+)", kernel_version)
    return m.group(1) if m else "0.0.0"


def _below(version: str, floor: str) -> bool:
    v, f = parse_semver(version), parse_semver(floor)
    if v is None or f is None:  # config validation refuses malformed floors; be fail-closed anyway
        return True
    return v.key() < f.key()


def config_floors(manifest: Manifest, min_versions: Mapping[str, str]) -> list[tuple[str, str]]:
    """The ``plugins.min_versions`` floors that apply to ``manifest``: keyed by its name or its alias.

    Returns at most one ``(floor, "plugins.min_versions.<key>")``: when the config floors both the
    name and the alias, the higher floor applies (fail-closed; on a tie, the name's key is cited).
    """
    found = [(min_versions[key], f"plugins.min_versions.{key}")
             for key in dict.fromkeys((manifest.name, manifest.alias)) if key in min_versions]
    if len(found) == 2 and _higher(found[1][0], found[0][0]):
        return found[1:]
    return found[:1]


def _higher(a: str, b: str) -> bool:
    """``a`` is the higher floor (a malformed one counts as the highest: fail-closed)."""
    va, vb = parse_semver(a), parse_semver(b)
    if va is None or vb is None:
        return va is None and vb is not None
    return va.key() > vb.key()


def evaluate_trust(manifest: Manifest, manifest_obj: Mapping[str, Any], trust: PluginTrust,
                   min_versions: Mapping[str, str], *, release_key: bytes | None, kernel_version: str) -> Verdict:
    """Decide whether a structurally valid plugin may load.

    Args:
        manifest: the validated manifest.
        manifest_obj: the raw ``manifest.json`` object (what the signature covers).
        trust: ``plugins.trust``.
        min_versions: ``plugins.min_versions`` (manifest name or alias -> strict semver floor).
        release_key: the embedded 32-byte release public key, or ``None``.
        kernel_version: the running kernel's version (first-party floor).

    Returns:
        The :class:`Verdict`; never raises for any manifest.
    """
    first_party_claim = manifest.publisher == RESERVED_PUBLISHER
    key: bytes | str | None = release_key if first_party_claim else trust.key_for(manifest.publisher)
    if not manifest.signature:
        state = "unsigned"
    elif key is None:
        state = "no-release-key" if first_party_claim else "unknown-publisher"
    elif verify_manifest_signature(manifest_obj, key):
        state = "first-party" if first_party_claim else "trusted"
    else:
        state = "tampered"
    trusted = state in ("first-party", "trusted")

    floors = config_floors(manifest, min_versions)
    if first_party_claim:
        floors.append((kernel_floor(kernel_version), "first-party plugins are floored at the kernel's version"))
    if floors:
        if not trusted:
            floor, source = floors[-1] if first_party_claim else floors[0]
            return Verdict(False, state, f"{manifest.name!r} has a version floor {floor} ({source}) that only a "
                                         f"trusted signature can prove, and {_why_untrusted(state, manifest)}; "
                                         f"opt-ins never bypass a floor")
        for floor, source in floors:
            if _below(manifest.version, floor):
                fix = ("install the plugins released with this kernel" if first_party_claim and "first-party" in source
                       else f"install {floor} or newer")
                return Verdict(False, f"{state} (below floor)",
                               f"version {manifest.version} is below the floor {floor} ({source}); {fix}")
    if trusted:
        return Verdict(True, state, "", first_party=state == "first-party")
    if state in ("unsigned", "tampered"):
        if trust.allow_unsigned:
            return Verdict(True, f"{state} (allowed)", "allowed by plugins.trust.allow_unsigned (unsafe)",
                           unsafe=True)
        return Verdict(False, state, _why_untrusted(state, manifest) +
                       ("; set plugins.trust.allow_unsigned: true to load it anyway (unsafe)" if state == "unsigned"
                        else "; reinstall it from the publisher"))
    # unknown-publisher (a first-party claim always has a floor, so no-release-key never gets here)
    if trust.allow_third_party:
        return Verdict(True, "unknown-publisher (allowed)", "allowed by plugins.trust.allow_third_party (unsafe)",
                       unsafe=True)
    return Verdict(False, state, f"publisher {manifest.publisher!r} is not in plugins.trust.publishers; "
                                 f"add its key or remove the file")


def _why_untrusted(state: str, manifest: Manifest) -> str:
    if state == "unsigned":
        return "it is unsigned"
    if state == "no-release-key":
        return ("this kernel was built without an embedded release key, so first-party signatures cannot be "
                "verified (run tools/build-plugins; docs/releasing.md)")
    if state == "unknown-publisher":
        return f"publisher {manifest.publisher!r} is not in plugins.trust.publishers"
    owner = "the embedded busbar release key" if manifest.publisher == RESERVED_PUBLISHER \
        else f"the key of publisher {manifest.publisher!r}"
    return f"its signature does not verify with {owner} (tampered, or signed with another key)"
