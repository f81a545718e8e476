"""Tool-call ids for Gemini function calls, and the thought-signature carrier inside them.

Gemini function calls usually come without an ``id``, and Gemini 3 signs the first function-call
part of a turn with a ``thoughtSignature`` that must come back, byte for byte, on that same part
in the next request or the call is refused (400 "Function call is missing a thought_signature").
A client of another protocol (OpenAI, Anthropic …) keeps nothing but the tool call's id, and a
second gateway replica or a restart keeps no store, so the signature travels inside the id:

    <base id> "__thought__" <base64url, unpadded, of the signature string>

- ``base id`` is Gemini's ``functionCall.id`` when it sent one, else a minted
  ``call_gm_<22 base62>`` (``MINTED_PREFIX``) that is never sent back to Gemini (the replayed
  part must equal the original, which had no id).
- The carrier alphabet is ``[A-Za-z0-9_-]``, so a carrying id still matches Anthropic's
  ``^[a-zA-Z0-9_-]+$``; providers with length limits (Bedrock's 64) get a deterministic alias of
  the whole id (``busbar.proto.bedrock.names``), the same alias for a call and its result.
- The carrier is removed before an id reaches Gemini (``split``); ids without one pass through.

Source: case C037 (signature round trip through OpenAI/Anthropic clients, second replica,
restart); case C048 (id patterns); Gemini "thought signatures" documentation.
"""

from __future__ import annotations

import base64
import binascii

from busbar.proto.ids import B62, random_chars

MINTED_PREFIX = "call_gm_"
"""Prefix of ids Busbar mints for Gemini calls that came without one (never sent to Gemini)."""

SIGNATURE_MARK = "__thought__"
"""Separator between the base id and the base64url-encoded thought signature."""

SKIP_VALIDATOR = "skip_thought_signature_validator"
"""Google's documented placeholder for a function call that no Gemini model signed (opt-in only)."""


def mint_call_id() -> str:
    """A fresh ``call_gm_`` id (22 random base62 characters)."""
    return MINTED_PREFIX + random_chars(B62, 22, 17)


def carry(call_id: str, signature: str | None) -> str:
    """``call_id`` with ``signature`` appended in the carrier form (unchanged when there is none)."""
    if not signature:
        return call_id
    payload = base64.urlsafe_b64encode(signature.encode()).rstrip(b"=").decode("ascii")
    return call_id + SIGNATURE_MARK + payload


def split(call_id: str) -> tuple[str, str | None]:
    """``(base id, signature or None)``: undo ``carry``; an id without a valid carrier is returned as is."""
    i = call_id.find(SIGNATURE_MARK)
    if i < 0:
        return call_id, None
    payload = call_id[i + len(SIGNATURE_MARK) :]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        sig = raw.decode()
    except (binascii.Error, ValueError):
        return call_id, None
    return call_id[:i], sig or None


def upstream_id(base: str) -> str | None:
    """The ``functionCall.id`` / ``functionResponse.id`` to send Gemini: ``None`` for a minted id."""
    if not base or base.startswith(MINTED_PREFIX):
        return None
    return base
