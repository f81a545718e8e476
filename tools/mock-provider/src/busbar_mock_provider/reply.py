"""Protocol-neutral default replies: what the mock answers when no script rule applies.

Each protocol module reads its request into a :class:`Prompt`; :func:`plan_reply` turns it into a
deterministic :class:`Reply` (text split into stream pieces, or one tool call), and the protocol
module renders that in its own wire shape.

Rules (docs/mock-provider.md, "Default replies"):
- text is ``"Hello from <model>. You said: <echo>"`` (echo = the last user text, shortened);
- tools present, tool choice not none, last message not a tool result -> one call to the chosen
  (else first) tool with arguments built from its JSON schema (:func:`example_from_schema`);
- last message a tool result -> text naming the result;
- a stop sequence found in the text cuts it there (finish ``stop_sequence``);
- ``max_tokens`` below the number of pieces truncates to ``max_tokens`` pieces (finish ``length``);
- one piece is one completion token; prompt tokens are about characters / 4.

What must not live here: any wire shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["Prompt", "Reply", "ToolCall", "ToolSpec", "example_from_schema", "plan_reply", "shorten"]

_PIECE = re.compile(r"\s*\S+")
_ECHO_MAX_CHARS = 60


@dataclass(slots=True)
class ToolSpec:
    """A client-declared function tool: its name and JSON schema for the arguments."""

    name: str
    schema: dict[str, Any]


@dataclass(slots=True)
class Prompt:
    """What a default reply depends on, read from any protocol's request body.

    Attributes:
        model: the requested model name, echoed back.
        stream: the client asked for a stream.
        include_usage: OpenAI ``stream_options.include_usage`` (ignored elsewhere).
        max_tokens: the output cap, or None when absent.
        stop: stop sequences, in request order.
        last_user_text: text of the last user turn ("" when none).
        tool_result: text of the tool result(s) when the last turn is one, else None.
        tools: function tools declared by the client.
        tool_choice: "auto", "none", "required" (any tool) or the forced tool's name.
        prompt_chars: characters of prompt text, for the token estimate.
        state: dialect-specific request state (Responses: the organisation and what it asked
            for, see ``responses_state``), or None.
    """

    model: str
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    last_user_text: str = ""
    tool_result: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str = "auto"
    prompt_chars: int = 0
    state: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolCall:
    """One tool call of a default reply; ``arguments_json`` is the compact JSON of ``arguments``."""

    id_seq: int
    name: str
    arguments: dict[str, Any]
    arguments_json: str


@dataclass(slots=True)
class Reply:
    """A planned reply.

    Attributes:
        pieces: text pieces, one per stream delta and per completion token ("".join = the text).
        tool_call: the call when the reply is a tool call (``pieces`` is then empty).
        finish: "end", "length", "stop_sequence" or "tool".
        stop_sequence: the matched stop sequence when ``finish == "stop_sequence"``.
        prompt_tokens / completion_tokens: usage figures.
    """

    pieces: list[str]
    tool_call: ToolCall | None
    finish: str
    stop_sequence: str | None
    prompt_tokens: int
    completion_tokens: int

    @property
    def text(self) -> str:
        """The whole reply text."""
        return "".join(self.pieces)


def shorten(text: str, limit: int = _ECHO_MAX_CHARS) -> str:
    """Collapse whitespace and cut to ``limit`` characters (with "..." when cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def _resolve_ref(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def example_from_schema(schema: Any, root: Any = None, depth: int = 0) -> Any:
    """Build a value that satisfies a JSON schema's required shape.

    Objects get their ``required`` properties only; strings -> "test", integers and numbers -> 1,
    booleans -> true, arrays -> [] (or one item when ``minItems`` > 0), null -> null; ``enum`` ->
    its first value, ``const`` -> the constant, ``anyOf``/``oneOf`` -> the first branch; local
    ``$ref`` (``#/$defs/...``) is followed. Unknown or missing types give "test".
    """
    if not isinstance(schema, dict) or depth > 8:
        return "test"
    root = schema if root is None else root
    schema = _resolve_ref(schema, root)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return example_from_schema(branches[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and isinstance(schema.get("properties"), dict):
        kind = "object"
    if kind == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        return {
            str(name): example_from_schema(props.get(name, {}), root, depth + 1)
            for name in required
            if isinstance(name, str)
        }
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        min_items = schema.get("minItems")
        if isinstance(min_items, int) and min_items > 0:
            return [example_from_schema(schema.get("items", {}), root, depth + 1)] * min_items
        return []
    return "test"


def _split(text: str, chunks: int | None) -> list[str]:
    pieces = _PIECE.findall(text)
    tail = text[sum(map(len, pieces)) :]
    if tail:
        if pieces:
            pieces[-1] += tail
        else:
            pieces.append(tail)
    if chunks is None or not pieces:
        return pieces
    if len(pieces) < chunks:
        base = list(pieces)
        while len(pieces) < chunks:
            nxt = base[len(pieces) % len(base)]
            pieces.append(nxt if nxt[:1].isspace() else " " + nxt)
        return pieces
    if len(pieces) > chunks:
        size, extra = divmod(len(pieces), chunks)
        out, pos = [], 0
        for i in range(chunks):
            take = size + (1 if i < extra else 0)
            out.append("".join(pieces[pos : pos + take]))
            pos += take
        return out
    return pieces


def _pick_tool(prompt: Prompt) -> ToolSpec | None:
    if not prompt.tools or prompt.tool_choice == "none" or prompt.tool_result is not None:
        return None
    if prompt.tool_choice not in ("auto", "required"):
        for tool in prompt.tools:
            if tool.name == prompt.tool_choice:
                return tool
    return prompt.tools[0]


def plan_reply(prompt: Prompt, *, seq: int, chunks: int | None = None, text: str | None = None) -> Reply:
    """Plan the deterministic default reply for a prompt.

    Args:
        prompt: the request, read by a protocol module.
        seq: a per-process request number, used to mint ids.
        chunks: exact number of text pieces (path knob ``/c<n>``), or None for one piece per word.
        text: replaces the generated text (script ``response.text``); stop and max_tokens still apply.

    Returns:
        The reply; see :class:`Reply`.
    """
    prompt_tokens = max(1, prompt.prompt_chars // 4)
    tool = _pick_tool(prompt) if text is None else None
    if tool is not None:
        args = example_from_schema(tool.schema)
        if not isinstance(args, dict):
            args = {}
        args_json = orjson.dumps(args).decode()
        completion = max(1, (len(tool.name) + len(args_json)) // 4) + 8
        return Reply([], ToolCall(seq, tool.name, args, args_json), "tool", None, prompt_tokens, completion)
    if text is None:
        if prompt.tool_result is not None:
            text = f"Hello from {prompt.model}. The tool returned: {shorten(prompt.tool_result)}"
        elif prompt.last_user_text.strip():
            text = f"Hello from {prompt.model}. You said: {shorten(prompt.last_user_text)}"
        else:
            text = f"Hello from {prompt.model}."
    pieces = _split(text, chunks)
    finish, matched = "end", None
    full = "".join(pieces)
    cut = min(((full.find(s), s) for s in prompt.stop if s and s in full), default=None)
    if cut is not None:
        full = full[: cut[0]]
        pieces = _split(full, None)
        finish, matched = "stop_sequence", cut[1]
    if prompt.max_tokens is not None and 0 <= prompt.max_tokens < len(pieces):
        pieces = pieces[: prompt.max_tokens]
        finish, matched = "length", None
    return Reply(pieces, None, finish, matched, prompt_tokens, len(pieces))
