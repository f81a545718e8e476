"""OpenAI Chat Completions request body -> IR (``read_request``).

The writer (IR -> body) is ``busbar.proto.openai.request_writer``. Shapes are the
``POST /v1/chat/completions`` body (``messages``, ``tools``, ``tool_choice``, sampling knobs).

Decisions worth knowing:

- ``system`` and ``developer`` messages both land in ``IrRequest.system`` (in order).
- Consecutive ``role: tool`` messages merge into ONE user message of ``ToolResultBlock``s; each
  result's ``name`` is filled from the assistant tool call it answers (Gemini needs it).
- ``tool_calls[].function.arguments`` (a JSON string) is parsed: ``""``/missing -> ``{}``,
  valid JSON -> the parsed value, anything else -> ``RawArguments(original string)`` (a ``str``
  subclass), which the OpenAI writer re-emits byte for byte and object-only writers reject
  with a 400 naming the call (case C039) — lossless, never a 500.
- ``image_url`` with a ``data:`` URI becomes a base64 ``ImageBlock`` (case C015);
  ``input_audio`` and ``file`` (``file_data``) become ``DocumentBlock`` (case C040). A ``file``
  part by ``file_id`` is refused (400): no other protocol can resolve an OpenAI file id.
- ``max_completion_tokens`` and ``max_tokens`` both fill ``max_tokens``; the spelling the client
  used is remembered as ``extra["max_completion_tokens"]`` so a same-protocol re-serialization
  keeps it (``extra`` is cleared before a foreign writer).
- Unmodelled top-level fields (``logprobs``, ``n``, ``logit_bias``, ``store``, ``metadata``,
  ``service_tier``, …) go to ``IrRequest.extra`` by reference (no copies).

Source: docs/protocols/README.md#translation-stays-byte-identical; docs/config-at-a-glance.md#pools (IR is lossless for
standard fields); cases C015, C017, C039, C040.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from busbar.ir.model import (
    IrBlock,
    IrMessage,
    IrRequest,
    IrTool,
    ReasoningAsk,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from busbar.proto.errors import BadRequest
from busbar.proto.openai.parts import parse_arguments, read_part

_KNOWN = frozenset({
    "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "max_tokens",
    "max_completion_tokens", "temperature", "top_p", "frequency_penalty", "presence_penalty",
    "seed", "stop", "response_format", "user", "reasoning_effort", "stream", "stream_options"
})


def read_request(body: dict[str, Any]) -> IrRequest:
    """Chat Completions request body -> ``IrRequest``.

    Args:
        body: the parsed JSON body (``messages`` required, a list of role-tagged objects).

    Returns:
        An ``IrRequest``; ``model`` is the name the client called (pool or model).

    Raises:
        BadRequest: the body is not Chat Completions shaped (the message names the key path).
    """
    ir, msgs = begin_chat(body)
    _read_messages(msgs, ir)
    tools = body.get("tools")
    if tools:
        ir.tools = read_tools(tools)
    tc = body.get("tool_choice")
    if tc is not None:
        ir.tool_choice = read_tool_choice(tc)
    ir.parallel_tool_calls = body.get("parallel_tool_calls")
    mct = body.get("max_completion_tokens")
    ir.max_tokens = mct if mct is not None else body.get("max_tokens")
    ir.temperature = body.get("temperature")
    ir.top_p = body.get("top_p")
    ir.frequency_penalty = body.get("frequency_penalty")
    ir.presence_penalty = body.get("presence_penalty")
    ir.seed = body.get("seed")
    stop = body.get("stop")
    if stop:
        ir.stop = [stop] if isinstance(stop, str) else list(stop)
    ir.response_format = body.get("response_format")
    ir.user = body.get("user")
    effort = body.get("reasoning_effort")
    if effort is not None:
        ir.reasoning = ReasoningAsk(effort=effort)
    ir.stream = bool(body.get("stream"))
    so = body.get("stream_options")
    ir.include_usage = bool(so.get("include_usage")) if isinstance(so, dict) else False
    extra = ir.extra
    if mct is not None:
        extra["max_completion_tokens"] = mct
    for k, v in body.items():
        if k not in _KNOWN:
            extra[k] = v
    return ir


def _read_messages(msgs: list[Any], ir: IrRequest) -> None:
    read_chat_messages(msgs, ir, content=_content, assistant=_assistant, system_roles=("system", "developer"),
                       tool_content=lambda c, i: _content(c, i, allow_none=True))


def read_chat_messages(msgs: list[Any], ir: IrRequest, *, content: Callable[[Any, int], list[IrBlock]],
                       assistant: Callable[[dict[str, Any], int], list[IrBlock]], system_roles: tuple[str, ...],
                       tool_content: Callable[[Any, int], list[IrBlock]],
                       system_content: Callable[[Any, int], list[IrBlock]] | None = None) -> None:
    """Read a role-tagged ``messages`` list (Chat Completions, Cohere) into ``ir.messages``/``ir.system``.

    Consecutive ``tool`` messages become one user turn of ``ToolResultBlock``s (named after the
    tool call they answer, for Gemini); ``user`` content is read by ``content``, ``assistant``
    messages by ``assistant``, ``system_roles`` messages go to ``ir.system`` (read by
    ``system_content``, default ``content``). ``i`` is the message
    index, for the key paths of errors.

    Raises:
        BadRequest: a message that is not an object, a tool message without ``tool_call_id``, an
            unknown role (the message lists the roles this protocol takes).
    """
    out = ir.messages
    tool_msg: IrMessage | None = None
    names: dict[str, str] = {}  # tool call id -> function name (ToolResultBlock.name, for Gemini)
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise BadRequest(f"messages[{i}]: must be an object")
        role = m.get("role")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise BadRequest(f"messages[{i}].tool_call_id: required for role 'tool'")
            block = ToolResultBlock(call_id, tool_content(m.get("content"), i), name=names.get(call_id))
            if tool_msg is None:
                tool_msg = IrMessage("user", [])
                out.append(tool_msg)
            tool_msg.content.append(block)
            continue
        tool_msg = None
        if role == "user":
            out.append(IrMessage("user", content(m.get("content"), i)))
        elif role == "assistant":
            blocks = assistant(m, i)
            out.append(IrMessage("assistant", blocks))
            for b in blocks:
                if isinstance(b, ToolUseBlock):
                    names[b.id] = b.name
        elif role in system_roles:
            ir.system.extend((system_content or content)(m.get("content"), i))
        else:
            roles = ", ".join(system_roles)
            raise BadRequest(f"messages[{i}].role: {role!r} is not one of {roles}, user, assistant, tool")


def _content(c: Any, i: int, allow_none: bool = False) -> list[IrBlock]:
    if isinstance(c, str):
        return [TextBlock(c)]
    if isinstance(c, list):
        return [read_part(p, i, j) for j, p in enumerate(c)]
    if c is None and allow_none:
        return []
    raise BadRequest(f"messages[{i}].content: must be a string or a list of content parts")


def _assistant(m: dict[str, Any], i: int) -> list[IrBlock]:
    blocks: list[IrBlock] = []
    rc = m.get("reasoning_content")
    if isinstance(rc, str) and rc:
        blocks.append(ThinkingBlock(text=rc))
    c = m.get("content")
    tcs = m.get("tool_calls")
    if isinstance(c, str):
        if c or not tcs:
            blocks.append(TextBlock(c))
    elif c is not None:
        blocks.extend(_content(c, i))
    if tcs:
        for k, tc in enumerate(tcs):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise BadRequest(f"messages[{i}].tool_calls[{k}].function.name: required")
            blocks.append(ToolUseBlock(tc.get("id") or "", fn["name"], parse_arguments(fn.get("arguments"))))
    return blocks


def begin_chat(body: Any) -> tuple[IrRequest, list[Any]]:
    """The checks every ``messages``-list body starts with: ``(IrRequest(model=body["model"]),
    body["messages"])``.

    Raises:
        BadRequest: ``body`` is not an object, or ``messages`` is not a list.
    """
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        raise BadRequest("messages: required, must be a list of message objects")
    return IrRequest(model=body.get("model")), msgs


def read_tools(tools: Any, *, nested: bool = True) -> list[IrTool]:
    """Function tools -> ``IrTool``: nested ``{"type": "function", "function": {name, description,
    parameters}}`` (Chat Completions, Cohere) or flat ``{"type": "function", name, …}`` (Responses).

    Raises:
        BadRequest: not a list, a tool of another type, or a tool without a name (names the index).
    """
    if not isinstance(tools, list):
        raise BadRequest("tools: must be a list")
    out = []
    for k, t in enumerate(tools):
        fn = (t.get("function") if nested else t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or t.get("type", "function") != "function":
            kind = t.get("type") if isinstance(t, dict) else t
            raise BadRequest(f"tools[{k}].type: {kind!r} is not supported (function tools only)")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest(f"tools[{k}]{'.function' if nested else ''}.name: required")
        tool = IrTool(name, fn.get("description"))
        params = fn.get("parameters")
        if params:
            tool.input_schema = params
        out.append(tool)
    return out


def read_tool_choice(tc: Any, *, nested: bool = True) -> ToolChoice:
    """``tool_choice`` -> ``ToolChoice``: ``auto``/``none``/``required`` or a named function,
    ``{"type": "function", "function": {"name"}}`` (nested) or ``{"type": "function", "name"}``.

    Raises:
        BadRequest: any other value (the message shows the accepted forms).
    """
    if tc == "auto" or tc == "none" or tc == "required":
        return ToolChoice(tc)
    if isinstance(tc, dict) and tc.get("type") == "function":
        name = (tc.get("function") or {}).get("name") if nested else tc.get("name")
        if isinstance(name, str) and name:
            return ToolChoice("tool", name)
    named = '{"type": "function", "function": {"name": ...}}' if nested else '{"type": "function", "name": ...}'
    raise BadRequest(f"tool_choice: must be 'auto', 'none', 'required' or {named}")
