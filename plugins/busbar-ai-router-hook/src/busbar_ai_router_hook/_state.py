"""The state: what the model reads, built from the request's prompt projection.

``build_state(request, settings) -> dict``: ``{"system"?: str, "messages": [{"role", "text"}]}`` from
the ``prompt: ro`` projection, with every ``state.redact`` JSONPath removed first, then cut to
``state.max_bytes`` (UTF-8 bytes of its compact JSON): the oldest turns go first, then the system
text, and only then is the current (last) message shortened (its head kept). The state is data:
the router's ``instructions`` are never part of it.

``state_text(state) -> (current, history)``: the text of the last message and of everything before it.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["build_state", "state_bytes", "state_text"]


def state_bytes(state: Mapping[str, Any]) -> int:
    """UTF-8 size of ``state`` as compact JSON."""
    return len(json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def build_state(request: Mapping[str, Any], redact: tuple[Any, ...], max_bytes: int) -> dict[str, Any]:
    """See the module docstring."""
    state: dict[str, Any] = {}
    if request.get("system"):
        state["system"] = str(request["system"])
    state["messages"] = [{"role": str(m.get("role", "")), "text": str(m.get("text", ""))}
                         for m in request.get("messages") or []]
    for path in redact:
        path.filter(lambda _v: True, state)
    if "messages" not in state or not isinstance(state["messages"], list):
        state["messages"] = []
    if sum(len(m["text"]) for m in state["messages"]) * 4 + len(state.get("system", "")) * 4 + 256 < max_bytes:
        return state                # surely within max_bytes (4 UTF-8 bytes per character at most): no JSON
    while state_bytes(state) > max_bytes and len(state["messages"]) > 1:
        state["messages"].pop(0)
    if state_bytes(state) > max_bytes and "system" in state:
        del state["system"]
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
    history = [str(state.get("system", ""))] + [str(m.get("text", "")) for m in msgs[:-1]]
    return current, "\n".join(h for h in history if h)
