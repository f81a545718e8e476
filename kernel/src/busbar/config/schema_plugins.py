"""The ``plugins:`` block of config.yaml: master switch, directory, trust policy, version floors.

Only shapes and per-field rules live here (pydantic v2, unknown keys rejected). What the policy
*does* to a tarball is ``busbar.loader.verify`` (pure); loading is ``busbar.loader``.

Example::

    plugins:
      enabled: true                 # master switch, default false: off = nothing is discovered
      dir: plugins                  # relative to the working directory
      trust:
        publishers:
          - { name: acme, public_key: "<64-hex ed25519 public key>" }
        allow_unsigned: false       # UNSAFE opt-in: load unsigned or tampered plugins
        allow_third_party: false    # UNSAFE opt-in: load plugins signed by an unknown publisher
      min_versions:
        acme-store-dynamo: "2.0.0"  # anti-downgrade floor, by manifest name or alias; no opt-in bypasses it

Source: docs/plugins.md.
"""
from __future__ import annotations

import re

from busbar_sdk.versions import RESERVED_PUBLISHER, is_valid_name, parse_semver
from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PluginTrust", "PluginsConfig", "Publisher"]

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Publisher(_Strict):
    """A third-party publisher's ed25519 verification key.

    Attributes:
        name: the manifest ``publisher`` value this key verifies (``[a-z0-9-]+``); ``busbar`` is
            reserved for the release key embedded in the kernel and cannot be configured.
        public_key: the raw 32-byte ed25519 public key as 64 hex digits (``busbar-plugin-pack
            keygen`` prints it); stored lowercase.
    """

    name: str
    public_key: str

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v == RESERVED_PUBLISHER:
            raise ValueError("the publisher name 'busbar' is reserved for the release key embedded in "
                             "the kernel (first-party plugins verify with zero configuration); "
                             "remove this entry")
        if not is_valid_name(v):
            raise ValueError(f"{v!r} is not a valid publisher name; use lowercase letters, digits and "
                             f"inner dashes ([a-z0-9-]+), exactly as the plugin's manifest spells it")
        return v

    @field_validator("public_key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not _HEX64.match(v):
            raise ValueError(f"must be a 64-hex ed25519 public key (32 bytes), got {len(v)} characters; "
                             f"paste the 'public' line printed by busbar-plugin-pack keygen")
        return v.lower()


class PluginTrust(_Strict):
    """Who may be loaded beyond Busbar's own first-party plugins.

    Attributes:
        publishers: allowlisted third-party publishers (names unique).
        allow_unsigned: UNSAFE explicit opt-in: load plugins whose signature is absent or does not
            verify (still never past a version floor). Logged at boot.
        allow_third_party: UNSAFE explicit opt-in: load plugins signed by a publisher that is not in
            ``publishers`` (their signature cannot be checked). Logged at boot.
    """

    publishers: tuple[Publisher, ...] = ()
    allow_unsigned: bool = False
    allow_third_party: bool = False

    @field_validator("publishers")
    @classmethod
    def _unique(cls, v: tuple[Publisher, ...]) -> tuple[Publisher, ...]:
        seen: set[str] = set()
        for p in v:
            if p.name in seen:
                raise ValueError(f"publisher {p.name!r} is listed twice; keep one entry per publisher")
            seen.add(p.name)
        return v

    def key_for(self, publisher: str) -> str | None:
        """The configured 64-hex key of ``publisher``, or ``None`` when it is not allowlisted."""
        for p in self.publishers:
            if p.name == publisher:
                return p.public_key
        return None


class PluginsConfig(_Strict):
    """``plugins:`` (docs/configuration.md). Defaults: disabled, ``dir: plugins``, empty trust, no floors.

    Attributes:
        enabled: master switch; ``false`` means no tarball is discovered, validated or loaded.
        dir: directory of ``*.tar.gz`` plugin tarballs; a relative path resolves against the
            working directory (``load_plugins(base_dir=...)``).
        trust: the trust policy (:class:`PluginTrust`).
        min_versions: anti-downgrade floors, manifest name or alias -> strict semver ``MAJOR.MINOR.PATCH``;
            both keyed: the higher floor applies; a key naming no plugin in plugins.dir warns.
    """

    enabled: bool = False
    dir: str = "plugins"
    trust: PluginTrust = Field(default_factory=PluginTrust)
    min_versions: dict[str, str] = Field(default_factory=dict)

    @field_validator("dir")
    @classmethod
    def _dir(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must name a directory (default: plugins)")
        return v

    @field_validator("min_versions")
    @classmethod
    def _floors(cls, v: dict[str, str]) -> dict[str, str]:
        for name, floor in v.items():
            if not is_valid_name(name):
                raise ValueError(f"{name!r} is not a plugin manifest name ([a-z0-9-]+); key floors by the "
                                 f"name or alias busbar --list-plugins shows")
            if parse_semver(floor) is None:
                hint = f"; write {floor[1:]!r}" if floor[:1] in ("v", "V") and parse_semver(floor[1:]) else ""
                raise ValueError(f"{name}: {floor!r} is not a strict semver MAJOR.MINOR.PATCH version{hint}")
        return v
