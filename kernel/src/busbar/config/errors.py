"""Config faults: collected with their key paths, reported once, one line each, never a traceback.

Tree::

    ConfigError            the config cannot boot; ``.faults`` is a list of one-line strings
                           (``config.yaml: pools.smart.members[1].weight: must be ≥ 1 (…)``)

Source: seeds 001 "Startup validation summary"; STYLE.md §4.
"""
from __future__ import annotations

from typing import Iterable

from pydantic import ValidationError

# Tags pydantic adds to a location when it tries the branches of a union.
_UNION_TAGS = {"EnvRef", "FileRef", "ModuleRef", "HookRef", "FallbackPool", "str", "int",
               "dict[str,str]", "dict[str,dict[str,any]]", "function-after[_normalize_on_exhausted(), "
               "union[str,int,FallbackPool]]"}

_SECRET_HINT = ("must be a secret reference: { env: VAR }, { file: /path } or "
                "{ module: <secret-plugin>, settings: {...} }")


class ConfigError(Exception):
    """The merged config is invalid. ``faults``: one line per fault, file and key path first."""

    def __init__(self, faults: Iterable[str]):
        self.faults = list(faults)
        super().__init__("\n".join(self.faults))


def key_path(loc: Iterable) -> str:
    """Render a pydantic location as a config key path: ``pools.smart.members[1].weight``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            if part in _UNION_TAGS or str(part).startswith(("function-", "union[", "literal[")):
                continue
            out += ("." if out else "") + str(part)
    return out


def faults_from_validation(exc: ValidationError, source: str, prefix: str = "") -> list[str]:
    """Turn a pydantic ``ValidationError`` into one line per distinct key path.

    Union branches are collapsed (one fault per path); secret references get one clear hint.
    """
    by_path: dict[str, str] = {}
    for err in exc.errors(include_url=False):
        loc = err.get("loc", ())
        path = key_path(((prefix,) if prefix else ()) + tuple(loc))
        raw_tags = {str(p) for p in loc if isinstance(p, str)}
        etype = err.get("type", "")
        if raw_tags & {"EnvRef", "FileRef", "ModuleRef"} or path.endswith("api_key") and etype != "missing":
            base = path
            for suffix in (".env", ".file", ".module", ".settings"):
                if base.endswith(suffix):
                    base = base[: -len(suffix)]
            by_path.setdefault(base, f"{source}: {base}: {_SECRET_HINT}")
            continue
        if etype == "extra_forbidden":
            msg = "unknown key (typo?); remove it or check the spelling in seeds 001"
        elif etype == "missing":
            msg = "required key is missing"
        elif etype == "literal_error":
            msg = f"{err.get('input')!r} is not allowed; {err['msg'].replace('Input should be ', 'use ')}"
        else:
            msg = err["msg"].replace("Value error, ", "")
            if "input" in err and etype not in ("model_type", "dict_type"):
                msg = f"{err['input']!r}: {msg}" if not isinstance(err["input"], (dict, list)) else msg
        by_path.setdefault(path, f"{source}: {path or '(top level)'}: {msg}")
    return list(by_path.values())
