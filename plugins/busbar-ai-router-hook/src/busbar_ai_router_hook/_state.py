"""The state: what the model reads, built from the request's prompt projection.

``build_state(request, redact, max_bytes, headers) -> dict``: ``{"system"?: str, "headers"?: {name:
value}, "messages": [{"role", "text"}]}`` from the ``prompt: ro`` projection (``headers``: the
allowlisted ``state.headers`` the request carries, from the projection's ``request.headers``), with
every ``state.redact`` JSONPath removed first (a message whose ``text`` or ``role`` was removed
keeps it empty), then cut to ``state.max_bytes`` (UTF-8 bytes of its
compact JSON): the oldest turns go first, then the system text, then the headers, and only then is
the current (last) message shortened (its head kept). The state is data: the router's
``instructions`` are never part of it.

``state_text(state) -> (current, history)``: the text of the last message and of everything before
it (the headers as ``name: value`` lines first).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["build_state", "state_bytes", "state_text"]


def state_bytes(state: Mapping[str, Any]) -> int:
    """UTF-8 size of ``state`` as compact JSON."""
    return len(json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def build_state(request: Mapping[str, Any], redact: tuple[Any, ...], max_bytes: int,
                headers: tuple[str, ...] = ()) -> dict[str, Any]:
    """See the module docstring."""
    state: dict[str, Any] = {}
    if request.get("system"):
        state["system"] = str(request["system"])
    seen = request.get("headers")
    if headers and isinstance(seen, Mapping):
        picked = {h: str(seen[h]) for h in headers if h in seen}
        if picked:
            state["headers"] = picked
    state["messages"] = [{"role": str(m.get("role", "")), "text": str(m.get("text", ""))}
                         for m in request.get("messages") or []]
    for path in redact:
        path.filter(lambda _v: True, state)
    if "messages" not in state or not isinstance(state["messages"], list):
        state["messages"] = []
    for m in state["messages"]:      # a redacted text or role (``$.messages[0].text``) reads as empty
        m.setdefault("role", "")
        m.setdefault("text", "")
    extra = len(state.get("system", "")) + sum(len(k) + len(v) + 6 for k, v in (state.get("headers") or {}).items())
    if sum(len(m["text"]) for m in state["messages"]) * 4 + extra * 4 + 256 < max_bytes:
        return state                # surely within max_bytes (4 UTF-8 bytes per character at most): no JSON
    while state_bytes(state) > max_bytes and len(state["messages"]) > 1:
        state["messages"].pop(0)
    for part in ("system", "headers"):
        if state_bytes(state) > max_bytes and part in state:
            del state[part]
    over = state_bytes(state) - max_bytes
    if over > 0 and state["messages"]:
        last = state["messages"][-1]
        text = last.get("text", "")
        raw = text.encode("utf-8")
        last["text"] = raw[:max(0, len(raw) - over - 8)].decode("utf-8", errors="ignore")
        while state_bytes(state) > max_bytes and last["text"]:
            last["text"] = last["text"][:-16]
    return state


def state_text(state: Mapping[str, Any]) -> tuple[str, str]:
    """``(current message text, history text)`` of a state."""
    msgs = state.get("messages") or []
    current = str(msgs[-1].get("text", "")) if msgs else ""
    hdrs = state.get("headers")
    history = [f"{k}: {v}" for k, v in (hdrs.items() if isinstance(hdrs, Mapping) else ())]
    history += [str(state.get("system", ""))] + [str(m.get("text", "")) for m in msgs[:-1]]
    return current, "\n".join(h for h in history if h)
