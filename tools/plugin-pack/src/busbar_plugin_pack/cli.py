"""``busbar-plugin-pack``: keygen, pack, verify, inspect.

Exit status: 0 success; 1 the artifact is invalid or its signature does not verify; 2 misuse
(bad arguments, missing key, unreadable input). Errors are one line on stderr, never a traceback.

Source: issue 4 (the pack tool).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from busbar_sdk.artifact import (
    KINDS,
    RESERVED_PUBLISHER,
    ArtifactError,
    BuildError,
    SigningError,
    build_wheel,
    generate_signing_key,
    pack_artifact,
    public_key_from_seed,
    read_artifact,
    verify_manifest_signature,
)

__all__ = ["main"]

PROG = "busbar-plugin-pack"
_NEEDS_PROMPT = {"no": "no", "none": "no", "": "no", "ro": "ro", "read": "ro",
                 "rw": "rw", "readwrite": "rw", "read-write": "rw"}
_NEEDS_USER = {"no": "no", "none": "no", "": "no", "ro": "ro", "read": "ro"}


class _Misuse(Exception):
    """A usage error with a one-line message (exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Misuse(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Build, sign, verify and inspect Busbar plugin tarballs.")
    sub = p.add_subparsers(dest="command", metavar="{keygen,pack,verify,inspect}", parser_class=_Parser)
    sub.required = True
    sub.add_parser("keygen", help="print a new ed25519 signing key (private seed and public key, 64 hex each)")
    pk = sub.add_parser("pack", help="build a signed plugin tarball from a wheel or a project directory")
    pk.add_argument("--wheel", required=True, metavar="WHL_OR_PROJECT_DIR",
                    help="a .whl file, or a project directory to build with pip wheel (offline)")
    pk.add_argument("--name", required=True, help="canonical plugin name, [a-z0-9-]+")
    pk.add_argument("--alias", required=True, help="short config name, [a-z0-9-]+")
    pk.add_argument("--kind", required=True, help="|".join(KINDS))
    pk.add_argument("--version", required=True, help="strict semver, e.g. 1.2.0")
    pk.add_argument("--publisher", required=True, help="publisher name; 'busbar' is first-party only")
    pk.add_argument("--out", required=True, metavar="FILE.tar.gz")
    pk.add_argument("--needs-prompt", default="no", metavar="no|ro|rw")
    pk.add_argument("--needs-user", default="no", metavar="no|ro")
    pk.add_argument("--settings-schema-file", metavar="F", help="a JSON Schema (2020-12) of the settings")
    pk.add_argument("--description", default="")
    pk.add_argument("--homepage", default="")
    pk.add_argument("--license", default="")
    pk.add_argument("--abi-version", type=int, default=None, help="default: the newest supported for --kind")
    pk.add_argument("--allow-unsigned", action="store_true",
                    help="write an unsigned artifact when BUSBAR_SIGN_KEY is not set")
    vf = sub.add_parser("verify", help="check structure and (with --publisher-key) the signature")
    vf.add_argument("file")
    vf.add_argument("--publisher-key", metavar="HEX", help="64-hex ed25519 public key of the publisher")
    ins = sub.add_parser("inspect", help="print the manifest and the wheel's entry point")
    ins.add_argument("file")
    return p


def _keygen() -> int:
    seed, public = generate_signing_key()
    print(f"private (BUSBAR_SIGN_KEY, keep secret): {seed}")
    print(f"public (publishers allowlist / BUSBAR_RELEASE_PUBKEY): {public}")
    return 0


def _pack(args: argparse.Namespace) -> int:
    if args.kind not in KINDS:
        raise _Misuse(f"--kind {args.kind!r} is not one of {', '.join(KINDS)}")
    prompt = _NEEDS_PROMPT.get(args.needs_prompt.lower())
    user = _NEEDS_USER.get(args.needs_user.lower())
    if prompt is None:
        raise _Misuse(f"--needs-prompt {args.needs_prompt!r} is not one of no, ro, rw")
    if user is None:
        raise _Misuse(f"--needs-user {args.needs_user!r} is not one of no, ro")
    out = Path(args.out)
    if not out.name.endswith((".tar.gz", ".tgz")):
        raise _Misuse(f"--out {args.out!r} must end in .tar.gz or .tgz")
    if not out.parent.is_dir():
        raise _Misuse(f"--out directory {str(out.parent)!r} does not exist")
    key = os.environ.get("BUSBAR_SIGN_KEY", "").strip() or None
    if key is None and not args.allow_unsigned:
        raise _Misuse("BUSBAR_SIGN_KEY is not set: export the 64-hex private seed printed by "
                      f"'{PROG} keygen', or pass --allow-unsigned to write an unsigned artifact")
    if key is not None:
        public_key_from_seed(key)  # malformed key: SigningError, before any build
    schema = None
    if args.settings_schema_file:
        try:
            schema = Path(args.settings_schema_file).read_text("utf-8")
        except OSError as exc:
            raise _Misuse(f"--settings-schema-file: cannot read {args.settings_schema_file}: {exc.strerror}") from None
    src = Path(args.wheel)
    if not src.exists():
        raise _Misuse(f"--wheel {args.wheel!r} does not exist")
    with tempfile.TemporaryDirectory(prefix="busbar-plugin-pack-") as tmp:
        if src.is_file():
            if src.suffix != ".whl":
                raise _Misuse(f"--wheel {args.wheel!r} is a file but not a .whl")
            wheel = src
        else:
            wheel = build_wheel(src, Path(tmp))
        data = pack_artifact(
            wheel_name=wheel.name, wheel_bytes=wheel.read_bytes(), name=args.name, alias=args.alias,
            kind=args.kind, version=args.version, publisher=args.publisher, signing_key=key,
            allow_unsigned=args.allow_unsigned, needs_prompt=prompt, needs_user=user, settings_schema=schema,
            description=args.description, homepage=args.homepage, license=args.license,
            abi_version=args.abi_version)
    partial = out.with_name(f".{out.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, out)
    how = f"signed by {public_key_from_seed(key)}" if key else "UNSIGNED (loads only with plugins.trust.allow_unsigned)"
    print(f"wrote {out}: {args.name} ({args.alias}) {args.kind} {args.version} by {args.publisher}, {how}")
    return 0


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise _Misuse(f"cannot read {path}: {exc.strerror}") from None


def _verify(args: argparse.Namespace) -> int:
    artifact = read_artifact(_read(args.file))
    m = artifact.manifest
    head = f"{args.file}: {m.name} {m.version} ({m.kind}) by {m.publisher}: structure OK"
    if not m.signature:
        print(f"{head}; UNSIGNED")
        return 1 if args.publisher_key else 0
    if not args.publisher_key:
        where = "the release key embedded in the kernel" if m.publisher == RESERVED_PUBLISHER else "--publisher-key"
        print(f"{head}; signed, signature not checked (verify it with {where})")
        return 0
    if verify_manifest_signature(artifact.manifest_obj, args.publisher_key):
        print(f"{head}; signature verifies with the given key")
        return 0
    print(f"{head}; signature does NOT verify with the given key (tampered, or signed with another key)")
    return 1


def _inspect(args: argparse.Namespace) -> int:
    artifact = read_artifact(_read(args.file))
    ep_name, module, attr = artifact.wheel.entry_point
    doc = {"file": args.file, "manifest": dict(artifact.manifest_obj),
           "wheel": {"member": artifact.wheel_name, "bytes": len(artifact.wheel_bytes),
                     "distribution": artifact.wheel.dist_name, "version": artifact.wheel.dist_version,
                     "entry_point": f"{ep_name} = {module}:{attr}", "top_level": list(artifact.wheel.top_level),
                     "unpacked_bytes": artifact.wheel.unpacked_bytes}}
    print(json.dumps(doc, indent=2, ensure_ascii=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (see the module docstring)."""
    try:
        args = _parser().parse_args(argv)
        if args.command == "keygen":
            return _keygen()
        if args.command == "pack":
            return _pack(args)
        if args.command == "verify":
            return _verify(args)
        return _inspect(args)
    except _Misuse as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (SigningError, BuildError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except ArtifactError as exc:
        print(f"{PROG}: invalid artifact: {exc}", file=sys.stderr)
        return 1
