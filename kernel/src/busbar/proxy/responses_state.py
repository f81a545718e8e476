"""Responses state belongs to the member that issued it: route it there, or strip it once.

An OpenAI Responses request can carry state that only the account which created it can read:
``previous_response_id`` (a stored response) and replayed ``reasoning`` input items with an
``encrypted_content`` blob. In a pool of Responses members under different accounts, another
member answers ``404 previous_response_not_found`` / ``400 invalid_encrypted_content``. So
(``docs/protocols/responses.md#state-routing``):

- :func:`record` / :func:`recording` remember, per gateway process, which lane issued each response
  id and each reasoning item id that carries a blob (:class:`Issuers`: a bounded LRU map, oldest
  forgotten first), from every successful Responses-to-Responses answer of a pool with two or more
  Responses members (JSON bodies, and the ``response.completed`` event of a stream).
- :func:`refs_of` reads a request's state and its issuer; the failover walk
  (``busbar.proxy.engine``) tries the issuing member first. When it is unusable or fails:
  a request with ``previous_response_id`` gets that member's failure (or the pool's 503), never
  another member's "not found"; a request with only blobs is sent once to another member with the
  blobs stripped (:func:`strip`: reasoning items keep their summaries, items left with nothing
  are dropped) and the reply says ``x-busbar-translation-dropped: encrypted_content``.
- Issuer unknown (another replica, a restart, an evicted entry): the walk proceeds as usual; a
  member answering ``invalid_encrypted_content`` gets the request once more with the blobs
  stripped (not a failover hop, and a 400 never charges a breaker), and a member answering
  ``previous_response_not_found`` is skipped for the next member.

A request without such state, or to a pool with fewer than two Responses members, pays one
attribute comparison.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, Iterable
from typing import Any

import orjson

log = logging.getLogger("busbar")

__all__ = ["DROPPED", "Issuers", "StateRefs", "foreign_blob", "foreign_response", "issuers", "record",
           "recording", "refs_of", "strip", "tracks"]

#: What ``x-busbar-translation-dropped`` names when blobs were stripped.
DROPPED = "encrypted_content"
#: Ids remembered per gateway process (a response id or reasoning item id -> its issuing lane).
CAPACITY = 100_000
_COMPLETED = b"response.completed"


class Issuers:
    """A bounded map: state id (``resp_…`` / ``rs_…``) -> the name of the lane that issued it."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._map: OrderedDict[str, str] = OrderedDict()

    def record(self, ids: Iterable[str], lane: str) -> None:
        """Remember ``lane`` as the issuer of every id of ``ids`` (evicting the oldest past capacity)."""
        m = self._map
        for i in ids:
            m[i] = lane
            m.move_to_end(i)
        while len(m) > self.capacity:
            m.popitem(last=False)

    def lookup(self, ids: Iterable[str | None]) -> str | None:
        """The issuing lane of the first known id of ``ids``, or ``None``."""
        for i in ids:
            if i is not None:
                lane = self._map.get(i)
                if lane is not None:
                    return lane
        return None

    def __len__(self) -> int:
        return len(self._map)


def issuers(gw: Any) -> Issuers:
    """The gateway's :class:`Issuers` (created on first use)."""
    found: Issuers | None = getattr(gw, "responses_issuers", None)
    if found is None:
        found = Issuers()
        gw.responses_issuers = found
    return found


class StateRefs:
    """The Responses state one request carries.

    Attributes:
        previous: its ``previous_response_id``, or ``None``.
        items: ids of its replayed reasoning items that carry ``encrypted_content``.
        pinned: the pool member that issued that state, when known (``None``: unknown or not a member).
        stripped: the blobs were removed from the request (the reply names ``DROPPED``).
        retried: the one strip-and-resend on a member that refused a blob was used.
    """

    __slots__ = ("items", "pinned", "previous", "retried", "stripped")

    def __init__(self, previous: str | None, items: list[str], pinned: Any):
        self.previous = previous
        self.items = items
        self.pinned = pinned
        self.stripped = False
        self.retried = False


def tracks(call: Any, pool: Any) -> bool:
    """Does this request's walk route or record Responses state (a Responses client and a pool with
    two or more Responses members)?"""
    if call.ingress.name != "responses":
        return False
    return sum(1 for m in pool.members if m.lane.provider.protocol == "responses") >= 2


def refs_of(gw: Any, call: Any, pool: Any) -> StateRefs | None:
    """The state ``call`` carries and its issuing member in ``pool``; ``None`` when it carries none."""
    body = call.body
    prev = body.get("previous_response_id")
    prev = prev if isinstance(prev, str) and prev else None
    items = [it["id"] for it in _input(body)
             if it.get("type") == "reasoning" and isinstance(it.get("encrypted_content"), str)
             and isinstance(it.get("id"), str)]
    if prev is None and not items:
        return None
    lane = issuers(gw).lookup([prev, *items])
    pinned = next((m for m in pool.members if m.lane.name == lane), None) if lane is not None else None
    return StateRefs(prev, items, pinned)


def _input(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input")
    return [it for it in items if isinstance(it, dict)] if isinstance(items, list) else []


def strip(call: Any) -> bool:
    """Remove every replayed reasoning item's ``encrypted_content`` from ``call``'s body: an item
    keeps its ``summary`` (and any ``content``), an item left with no text at all is dropped.
    True when the body changed (the client's bytes and parsed request are replaced)."""
    body = call.body
    items = body.get("input")
    if not isinstance(items, list):
        return False
    out: list[Any] = []
    changed = False
    for it in items:
        if isinstance(it, dict) and it.get("type") == "reasoning" and "encrypted_content" in it:
            changed = True
            kept = {k: v for k, v in it.items() if k != "encrypted_content"}
            if _has_text(kept.get("summary")) or _has_text(kept.get("content")):
                out.append(kept)
            continue
        out.append(it)
    if not changed:
        return False
    new = {**body, "input": out}
    include = new.get("include")
    call.body = new
    call.raw = orjson.dumps(new)
    call.reset_ir()
    log.info("responses state: encrypted reasoning stripped for '%s' (include: %s)", call.called, include)
    return True


def _has_text(parts: Any) -> bool:
    return isinstance(parts, list) and any(isinstance(p, dict) and p.get("text") for p in parts)


def _code(failure: Any) -> str | None:
    info = failure.info
    return info.code if info is not None else None


def foreign_blob(failure: Any) -> bool:
    """Did a member refuse a blob it did not issue (``400 invalid_encrypted_content``)?"""
    return failure.status == 400 and _code(failure) == "invalid_encrypted_content"


def foreign_response(failure: Any) -> bool:
    """Did a member not know the ``previous_response_id`` (``previous_response_not_found``)?"""
    return failure.status in (400, 404) and _code(failure) == "previous_response_not_found"


def _issued(doc: Any) -> list[str]:
    """The state ids of one ``response`` object: its ``id`` and its blob-carrying reasoning items."""
    if not isinstance(doc, dict):
        return []
    ids = [doc["id"]] if isinstance(doc.get("id"), str) else []
    for it in doc.get("output") or ():
        if (isinstance(it, dict) and it.get("type") == "reasoning" and isinstance(it.get("id"), str)
                and it.get("encrypted_content")):
            ids.append(it["id"])
    return ids


def record(gw: Any, lane: Any, body: bytes) -> None:
    """Remember ``lane`` as the issuer of the state in a Responses JSON answer ``body``."""
    try:
        ids = _issued(orjson.loads(body))
    except orjson.JSONDecodeError:
        return
    if ids:
        issuers(gw).record(ids, lane.name)


async def recording(gw: Any, lane: Any, stream: Any) -> AsyncGenerator[bytes, None]:
    """Relay ``stream`` unchanged, remembering ``lane`` as the issuer of the state in its
    ``response.completed`` event (frames are only kept from the line where that event begins).
    Closing this generator closes ``stream``."""
    window = b""
    buf: bytearray | None = None
    try:
        async for chunk in stream:
            yield chunk
            if buf is not None:
                buf += chunk
                continue
            joined = window + chunk
            at = joined.find(_COMPLETED)
            if at >= 0:
                buf = bytearray(joined[joined.rfind(b"\n", 0, at) + 1:])
            else:
                window = joined[-len(_COMPLETED):]
    finally:
        await stream.aclose()
    for line in bytes(buf or b"").split(b"\n"):
        if line.startswith(b"data:"):
            try:
                event = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict) and event.get("type") == "response.completed":
                ids = _issued(event.get("response"))
                if ids:
                    issuers(gw).record(ids, lane.name)
                return
