"""The size fields of a hook's ``request`` view read straight from the client's body, no IR.

``body_sizes(ingress, body) -> Sizes | None``. On a same-protocol hop the request's IR is otherwise
never built (the client's bytes are relayed), and parsing it only to count messages and characters
is the largest single cost of a gate decision. For the body shapes below the numbers are read from
the parsed JSON directly; for anything else this returns ``None`` and the caller builds the IR
(``busbar.hooks.projection.ir_sizes``), which also keeps every validation error exactly where it
was (a body this accepts is one the dialect's reader accepts without an error, by construction).

Covered: OpenAI Chat Completions bodies whose messages are all ``{"role": system | developer |
user | assistant, "content": <string>}`` (an assistant message without ``tool_calls`` or
``reasoning_content``), with no ``tools``, no ``tool_choice``, and ``stop`` absent, a string or a
list: the everyday chat request. Tool traffic, content-part arrays, other roles and other ingress
protocols take the IR. ``tests/unit/hooks/test_hooks_bodyshape.py`` checks the two agree.

The numbers are those of ``busbar.proto.openai.request.read_request`` + ``ir_sizes``:
``message_count`` counts user and assistant messages (system and developer text goes to the system
prompt), ``total_chars`` is the length of every content string, ``has_tools`` is false, and
``max_tokens`` is ``max_completion_tokens``, else ``max_tokens``.

``body_prompt(ingress, body)`` is the same for the ``prompt: ro|rw`` text (system text joined by
newlines, one ``{role, text}`` per user/assistant message), equal to ``projection.prompt_view`` of
the IR for every body it reads. ``body_view(ingress, body)`` reads both in one pass (a gate granted
the prompt needs both).

Source: docs/hooks.md#what-a-hook-receives.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from busbar.hooks.projection import Prompt, Sizes

__all__ = ["body_prompt", "body_sizes", "body_view"]

#: role -> counted as a message (user, assistant) or as system text (system, developer)
_OPENAI_ROLES = {"user": True, "assistant": True, "system": False, "developer": False}


def _openai_messages(body: dict[str, Any]) -> list[dict[str, str]] | None:
    """``body["messages"]`` when the body is the everyday shape this module covers, else ``None``."""
    msgs = body.get("messages")
    if type(msgs) is not list:
        return None
    if body.get("tools") or body.get("tool_choice") is not None:
        return None
    stop = body.get("stop")
    if stop and type(stop) is not str and type(stop) is not list:
        return None
    roles = _OPENAI_ROLES
    for m in msgs:
        if type(m) is not dict:
            return None
        role = m.get("role")
        if type(role) is not str or type(m.get("content")) is not str:
            return None
        counted = roles.get(role)
        if counted is None:
            return None
        if counted and (m.get("tool_calls") or m.get("reasoning_content")):
            return None
    return msgs


def _openai(body: dict[str, Any]) -> Sizes | None:
    msgs = _openai_messages(body)
    if msgs is None:
        return None
    count = total = 0
    roles = _OPENAI_ROLES
    for m in msgs:
        if roles[m["role"]]:
            count += 1
        total += len(m["content"])
    mct = body.get("max_completion_tokens")
    return count, False, total, mct if mct is not None else body.get("max_tokens")


def _openai_prompt(body: dict[str, Any]) -> Prompt | None:
    msgs = _openai_messages(body)
    if msgs is None:
        return None
    system: list[str] | None = None
    out: list[dict[str, str]] = []
    roles = _OPENAI_ROLES
    for m in msgs:
        if roles[m["role"]]:
            out.append({"role": m["role"], "text": m["content"]})
        elif system is None:
            system = [m["content"]]
        else:
            system.append(m["content"])
    return (None if system is None else "\n".join(t for t in system if t)), out


def _openai_both(body: dict[str, Any]) -> tuple[Sizes, Prompt] | None:
    """``(_openai(body), _openai_prompt(body))`` in one walk of the messages: each is checked
    (the checks of ``_openai_messages``) as it is read."""
    msgs = body.get("messages")
    if type(msgs) is not list or body.get("tools") or body.get("tool_choice") is not None:
        return None
    stop = body.get("stop")
    if stop and type(stop) is not str and type(stop) is not list:
        return None
    count = total = 0
    system: list[str] | None = None
    out: list[dict[str, str]] = []
    roles = _OPENAI_ROLES
    for m in msgs:
        if type(m) is not dict:
            return None
        role = m.get("role")
        text = m.get("content")
        if type(role) is not str or type(text) is not str:
            return None
        counted = roles.get(role)
        if counted is None:
            return None
        total += len(text)
        if counted:
            if m.get("tool_calls") or m.get("reasoning_content"):
                return None
            count += 1
            out.append({"role": role, "text": text})
        elif system is None:
            system = [text]
        else:
            system.append(text)
    mct = body.get("max_completion_tokens")
    sizes = count, False, total, mct if mct is not None else body.get("max_tokens")
    if system is None:
        return sizes, (None, out)
    return sizes, ((system[0] if len(system) == 1 else "\n".join(t for t in system if t)), out)


_READERS: dict[str, Callable[[dict[str, Any]], Sizes | None]] = {"openai": _openai}
_PROMPT_READERS: dict[str, Callable[[dict[str, Any]], Prompt | None]] = {"openai": _openai_prompt}
_BOTH_READERS: dict[str, Callable[[dict[str, Any]], tuple[Sizes, Prompt] | None]] = {"openai": _openai_both}


def body_sizes(ingress: Any, body: Any) -> Sizes | None:
    """The request's :data:`busbar.hooks.projection.Sizes` read from ``body`` (the client's parsed
    JSON) for the ``ingress`` dialect, or ``None`` when this body needs the IR (see the module
    docstring). Never raises."""
    reader = _READERS.get(str(getattr(ingress, "name", "")))
    if reader is None or type(body) is not dict:
        return None
    return reader(body)


def body_prompt(ingress: Any, body: Any) -> Prompt | None:
    """The ``prompt: ro|rw`` view (:data:`busbar.hooks.projection.Prompt`: the flattened system
    text or ``None``, and ``[{"role", "text"}]``) read from ``body`` for the bodies
    :func:`body_sizes` reads, equal to ``prompt_view`` of their IR; ``None`` otherwise. Never raises."""
    reader = _PROMPT_READERS.get(str(getattr(ingress, "name", "")))
    if reader is None or type(body) is not dict:
        return None
    return reader(body)


def body_view(ingress: Any, body: Any) -> tuple[Sizes, Prompt] | None:
    """``(body_sizes(...), body_prompt(...))`` read in one pass over ``body`` (one shape check, one
    walk of the messages), for a hook granted the prompt; ``None`` exactly when either would be.
    Never raises."""
    reader = _BOTH_READERS.get(str(getattr(ingress, "name", "")))
    if reader is None or type(body) is not dict:
        return None
    return reader(body)
