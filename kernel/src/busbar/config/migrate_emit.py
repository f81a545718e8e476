"""Render a migrated config tree as YAML with ``# TODO(migrate)`` / ``# WARNING(migrate)`` comments.

``render(doc, notes, header) -> str``. ``notes`` maps a key path (a tuple of keys and list indices,
``("auth", "role_bindings", "ad", "platform", "allowed_pools")``) to comment lines printed directly
above that key or list item; the empty path's notes go under the header. Style follows the seeds:
block maps, two-space indent, small flat maps and scalar lists in flow style (``{ env: KEY }``,
``[fast]``) unless a note sits inside them.

Scalars are written plain when YAML reads them back unchanged in their context (``${VAR}`` references
included, so the result interpolates exactly like the input did), otherwise double-quoted.

PyYAML has no comment-preserving writer and the kernel takes no extra dependency for one, hence this
small emitter. What must not live here: the conversions (``busbar.config.migrate``).

Source: docs/configuration.md#migrating-from-1x (``# TODO(migrate)`` / ``# WARNING(migrate)`` comments
where a human must decide).
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml

Path = tuple[Any, ...]
_FLOW_MAX = 96


_PLAIN = re.compile(r"[A-Za-z0-9_./$~+(][A-Za-z0-9_./@$~+()=:,{}\[\] -]*\Z")
_LOADERS = tuple(dict.fromkeys((yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader))))


def _reads_back(probe: str, check: Any) -> bool:
    """True when every YAML loader Busbar uses reads ``probe`` so that ``check(doc)`` holds."""
    for loader in _LOADERS:
        try:
            if not check(yaml.load(probe, Loader=loader)):
                return False
        except (yaml.YAMLError, AttributeError, TypeError):
            return False
    return True


def scalar(value: Any, *, flow: bool = False, key: bool = False) -> str:
    """One scalar as YAML text, plain when unambiguous in its context, else double-quoted."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            text = text.replace("e", ".0e", 1)  # YAML 1.1 reads 1e-05 as a string, 1.0e-05 as a float
        return text
    text = str(value)
    if _PLAIN.match(text) and text == text.strip():
        if key and flow:
            ok = _reads_back(f"{{ {text}: 1 }}", lambda d: isinstance(d, dict) and list(d) == [text])
        elif key:
            ok = _reads_back(f"{text}: 1", lambda d: isinstance(d, dict) and list(d) == [text])
        elif flow:
            ok = _reads_back(f"k: {{ a: {text} }}", lambda d: d["k"] == {"a": text})
        else:
            ok = _reads_back(f"k: {text}", lambda d: d == {"k": text})
        if ok:
            return text
    return _quote(text)


def _quote(text: str) -> str:
    """A YAML double-quoted scalar: JSON escapes, plus \\uXXXX for anything YAML may not carry raw."""
    out = json.dumps(text, ensure_ascii=False)
    return "".join(c if 0x20 <= ord(c) < 0x7F or (ord(c) >= 0xA0 and ord(c) not in _UNSAFE and
                                                 not 0xD800 <= ord(c) <= 0xDFFF) else
                   (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}") for c in out)


_UNSAFE = {0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF}


def _has_notes(notes: dict[Path, list[str]], path: Path) -> bool:
    n = len(path)
    return any(len(p) > n and p[:n] == path for p in notes)


def _flow(value: Any) -> str | None:
    """``value`` in flow style when it is small and flat enough, else None."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        parts = []
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                inner = _flow(v)
                if inner is None or (isinstance(v, dict) and v):
                    return None
                parts.append(f"{scalar(k, key=True, flow=True)}: {inner}")
            else:
                parts.append(f"{scalar(k, key=True, flow=True)}: {scalar(v, flow=True)}")
        text = "{ " + ", ".join(parts) + " }"
    elif isinstance(value, list):
        if not value:
            return "[]"
        if any(isinstance(v, (dict, list)) for v in value):
            return None
        text = "[" + ", ".join(scalar(v, flow=True) for v in value) + "]"
    else:
        return scalar(value)
    return text if len(text) <= _FLOW_MAX else None


def _comments(notes: dict[Path, list[str]], path: Path, indent: str, out: list[str]) -> None:
    for line in notes.get(path, ()):
        out.append(f"{indent}# {line}")


def _value(value: Any, path: Path, depth: int, notes: dict[Path, list[str]], out: list[str],
           lead: str) -> None:
    """Write ``lead`` (``"key:"`` or ``"-"``) and ``value`` at ``depth``."""
    indent = "  " * depth
    if not isinstance(value, (dict, list)):
        out.append(f"{indent}{lead} {scalar(value)}")
        return
    flow = None if _has_notes(notes, path) else _flow(value)
    if flow is not None and (len(indent) + len(lead) + 1 + len(flow)) <= _FLOW_MAX + 24:
        out.append(f"{indent}{lead} {flow}")
        return
    out.append(f"{indent}{lead}")
    if isinstance(value, dict):
        _map(value, path, depth + 1, notes, out)
    else:
        _seq(value, path, depth + 1, notes, out)


def _map(doc: dict[Any, Any], path: Path, depth: int, notes: dict[Path, list[str]], out: list[str]) -> None:
    indent = "  " * depth
    for k, v in doc.items():
        _comments(notes, path + (k,), indent, out)
        _value(v, path + (k,), depth, notes, out, f"{scalar(k, key=True)}:")


def _seq(items: list[Any], path: Path, depth: int, notes: dict[Path, list[str]], out: list[str]) -> None:
    indent = "  " * depth
    for i, v in enumerate(items):
        _comments(notes, path + (i,), indent, out)
        if isinstance(v, dict) and v and (_has_notes(notes, path + (i,)) or _flow(v) is None):
            sub: list[str] = []
            _map(v, path + (i,), depth + 1, notes, sub)
            first = next(j for j, line in enumerate(sub) if not line.lstrip().startswith("#"))
            sub[first] = f"{indent}- {sub[first].lstrip()}"
            out.extend(sub)
        else:
            _value(v, path + (i,), depth, notes, out, "-")


def render(doc: dict[Any, Any], notes: dict[Path, list[str]], header: list[str]) -> str:
    """The whole document: header comment lines, the root notes, then the body."""
    out = [f"# {line}" if line else "#" for line in header]
    _comments(notes, (), "", out)
    if out:
        out.append("")
    _map(doc, (), 0, notes, out)
    return "\n".join(out) + "\n"
