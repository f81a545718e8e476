"""Responses state that belongs to one organisation, as the real API keeps it.

OpenAI binds two kinds of Responses state to the organisation whose key created them: a stored
response (``previous_response_id`` names it) and a reasoning item's ``encrypted_content`` (an
opaque blob only that organisation can decrypt). Another organisation's key gets
``404 previous_response_not_found`` or ``400 invalid_encrypted_content``. The mock takes the
organisation from the bearer key (two members with different keys = two organisations) and
refuses foreign state exactly like that, so a gateway that sends state to the wrong pool member
sees the real failure.

- :func:`org_of` ``(headers) -> str``: the organisation tag of a request (8 hex digits).
- :func:`state_error` ``(body, org) -> ErrorReply | None``: the 404/400 for foreign state.
- :func:`reasoning_item` ``(seq, org, summary, encrypted) -> dict``: a reasoning output item
  whose blob is bound to ``org``; :func:`remember` records a stored response id.

What must not live here: rendering the rest of the response, routing, sockets.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from .base import ErrorReply
from .openai_chat import error_body

__all__ = ["org_of", "reasoning_item", "remember", "state_error"]

#: The prefix OpenAI's blobs start with (a Fernet token); the mock's carry the org tag after it.
BLOB_PREFIX = "gAAAAAB"
_MAX = 100_000
_stored: OrderedDict[tuple[str, str], None] = OrderedDict()
_lock = threading.Lock()


def org_of(headers: dict[str, str]) -> str:
    """The organisation tag of a request: a hash of its bearer key (8 hex digits)."""
    key = headers.get("authorization", "")[7:].strip()
    return hashlib.blake2b(key.encode(), digest_size=4).hexdigest()


def _blob(org: str, item_id: str) -> str:
    mac = hashlib.blake2b(f"{org}:{item_id}".encode(), digest_size=24).hexdigest()
    return f"{BLOB_PREFIX}{org}{mac}"


def reasoning_item(item_id: str, org: str, summary: str, encrypted: bool) -> dict[str, Any]:
    """A ``reasoning`` output item with a one-line summary; with ``encrypted`` its
    ``encrypted_content`` blob, which only ``org`` can send back."""
    item: dict[str, Any] = {"id": item_id, "type": "reasoning",
                            "summary": [{"type": "summary_text", "text": summary}]}
    if encrypted:
        item["encrypted_content"] = _blob(org, item_id)
    return item


def remember(org: str, response_id: str) -> None:
    """Record a stored response of ``org`` (bounded: the oldest are forgotten first)."""
    with _lock:
        _stored[(org, response_id)] = None
        while len(_stored) > _MAX:
            _stored.popitem(last=False)


def state_error(body: dict[str, Any], org: str) -> ErrorReply | None:
    """The real API's answer to state ``org`` did not issue, or ``None`` when all of it is ``org``'s.

    ``previous_response_id`` unknown to ``org``: 404 ``previous_response_not_found``. A replayed
    ``reasoning`` input item whose ``encrypted_content`` was not minted for ``org`` (or for that
    item id): 400 ``invalid_encrypted_content``.
    """
    prev = body.get("previous_response_id")
    if isinstance(prev, str):
        with _lock:
            known = (org, prev) in _stored
        if not known:
            msg = f"Previous response with id '{prev}' not found."
            return ErrorReply(404, error_body(msg, "invalid_request_error", "previous_response_id",
                                              "previous_response_not_found"))
    items = body.get("input")
    for it in items if isinstance(items, list) else ():
        if not isinstance(it, dict) or it.get("type") != "reasoning":
            continue
        blob = it.get("encrypted_content")
        if blob is None:
            continue
        if not isinstance(blob, str) or blob != _blob(org, str(it.get("id", ""))):
            msg = f"The encrypted content for item {it.get('id')} could not be verified."
            return ErrorReply(400, error_body(msg, "invalid_request_error", None, "invalid_encrypted_content"))
    return None
