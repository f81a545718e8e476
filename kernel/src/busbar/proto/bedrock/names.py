"""Tool-call ids and tool names that fit a provider's patterns: deterministic aliases and their reversal.

Bedrock Converse takes ``toolUse.toolUseId`` / ``toolResult.toolUseId`` and ``toolSpec.name``
only as 1-64 characters of ``[a-zA-Z0-9_-]``; Gemini takes function names matching
``[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}``. Ids and names minted elsewhere break those rules (OpenAI
``call_…|fc_…`` ids of ~90 characters, Gemini signature-carrying ids of several hundred, MCP
names such as ``mcp.files/read``), and a payload carrying one fails on every fallback member.

Rules (case C048):

- A value that already fits is sent byte for byte.
- Otherwise the alias is the value with every character outside the pattern replaced by ``_``,
  cut to leave room, then ``_`` and 16 characters of base64url BLAKE2b-96 of the original. Same
  input, same alias — across requests, replicas and restarts — so a call and its result always
  agree, and values that share a long prefix still get distinct aliases (96-bit digest).
- Names must come back to the client under their original spelling. ``wire_name`` records every
  alias it issues in a bounded process-local table (alias -> original; deterministic, so any
  replica re-derives the same entry for the same request), and ``client_name`` reverses it when
  the provider's answer names the tool. Ids are not reversed: answers carry ids the provider
  minted, never aliases of the client's ids.

Source: case C048; Bedrock ``ToolName``/``ToolUseId`` shapes (botocore ``bedrock-runtime``
service model); Gemini function-declaration naming rules.
"""

from __future__ import annotations

import base64
import hashlib
import re

BEDROCK_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""Bedrock ``toolUseId`` (as Claude-on-Bedrock enforces it) and ``toolSpec.name``."""

GEMINI_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}")
"""Gemini ``functionDeclarations[].name``."""

_BAD_BEDROCK = re.compile(r"[^a-zA-Z0-9_-]")
_BAD_GEMINI = re.compile(r"[^a-zA-Z0-9_.:-]")
_MAX_TABLE = 65_536
_aliases: dict[str, str] = {}


def _digest(value: str) -> str:
    raw = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=12).digest()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def alias(value: str, pattern: re.Pattern[str] = BEDROCK_ID, bad: re.Pattern[str] = _BAD_BEDROCK) -> str:
    """``value`` if it fully matches ``pattern``, else its deterministic alias (<= 64 characters).

    Args:
        value: an id or name.
        pattern: what the provider accepts (default: Bedrock's ``[a-zA-Z0-9_-]{1,64}``).
        bad: the characters to replace by ``_`` (complement of the pattern's alphabet).
    """
    if pattern.fullmatch(value):
        return value
    head = bad.sub("_", value)[:47]
    if pattern is GEMINI_NAME and not (head[:1].isalpha() or head[:1] == "_"):
        head = "t" + head[:46]
    return f"{head}_{_digest(value)}"


_fits: dict[tuple[str, bool], str] = {}


def wire_name(name: str, gemini: bool = False) -> str:
    """The tool name to send upstream (Bedrock rules, or Gemini's with ``gemini=True``); remembers aliases."""
    key = (name, gemini)
    out = _fits.get(key)
    if out is not None:
        return out
    out = alias(name, GEMINI_NAME, _BAD_GEMINI) if gemini else alias(name)
    if out != name:
        if len(_aliases) >= _MAX_TABLE:
            _aliases.pop(next(iter(_aliases)))
        _aliases[out] = name
    if len(_fits) >= _MAX_TABLE:
        _fits.clear()
    _fits[key] = out
    return out


def client_name(name: str) -> str:
    """The client's spelling of a tool name the provider sent back (identity unless it is an alias)."""
    return _aliases.get(name, name) if _aliases else name
