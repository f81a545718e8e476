"""OpenAI Responses (``POST /v1/responses``) as the real API speaks it.

Shapes follow the captures in ``fixtures/openai-responses/``: the non-stream ``response``
object of ``text-basic.response.json`` (every request setting echoed, ``usage`` with its
``*_details``), the typed event stream of ``text-stream.response.sse.txt`` (``event:`` line +
``data:`` with ``type`` and a ``sequence_number`` counting from 0; ``response.created``,
``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta`` with ``logprobs`` and ``obfuscation``, ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done``, ``response.completed``; no
``[DONE]``) and the function-call events of ``function-call-stream.response.sse.txt``
(``arguments: ""`` when added, argument fragments, ``function_call_arguments.done``). A
``max_output_tokens`` cut ends in ``status: "incomplete"`` (``response.incomplete`` when
streaming). Errors are OpenAI envelopes: the Responses 400 capture, the OpenAI 401/404
captures, synthesized 429 ``rate_limit_exceeded`` / 5xx ``server_error``; the mid-stream error is
``event: error`` (nested ``error`` as in ``error-in-stream.response.chunks.jsonl``) followed by
``event: response.failed``.

Account state (``responses_state``): the organisation is the bearer key; ``previous_response_id``
and a replayed reasoning item's ``encrypted_content`` that another organisation issued are refused
as the real API refuses them. A request with ``reasoning`` (or ``include:
["reasoning.encrypted_content"]``) gets a ``reasoning`` output item first (a one-line summary; the
org-bound blob when included); a response is stored for ``previous_response_id`` unless
``store: false``.

What must not live here: routing, fault injection, socket handling.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import orjson

from .base import Dialect, ErrorReply, Rendered, mint_id, text_of
from .openai_chat import OpenAIChat, error_body
from .reply import Prompt, Reply, ToolSpec
from .responses_state import org_of, reasoning_item, remember, state_error

__all__ = ["OpenAIResponses"]

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
_CAPTURE_400 = "openai-responses/error-400-invalid-parameter.response.json"
_STREAM_ERROR = "The server had an error while processing your request. Sorry about that!"


def _hex_id(prefix: str, seq: int, salt: str) -> str:
    """A Responses-looking id: prefix + 50 hex digits, deterministic per (seq, salt)."""
    return prefix + hashlib.blake2b(f"{salt}:{seq}".encode(), digest_size=25).hexdigest()


def _pad(piece: str, n: int) -> str:
    """The ``obfuscation`` field: random-looking padding so every delta has about the same length."""
    return hashlib.blake2b(f"{n}:{piece}".encode(), digest_size=8).hexdigest()[: max(2, 16 - len(piece))]


def _tool_choice(raw: Any) -> str:
    if raw in ("none", "auto", "required"):
        return str(raw)
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("name"), str):
        return str(raw["name"])
    return "auto"


def _split_args(args_json: str) -> list[str]:
    step = max(1, -(-len(args_json) // 3))
    return [args_json[i : i + step] for i in range(0, len(args_json), step)]


class OpenAIResponses(Dialect):
    """The OpenAI Responses dialect (``match.protocol: "responses"``)."""

    name = "responses"
    request_id_header = "x-request-id"

    def authorized(self, headers: dict[str, str]) -> bool:
        """``Authorization: Bearer <key>`` with a non-empty key."""
        auth = headers.get("authorization", "")
        return auth[:7].lower() == "bearer " and bool(auth[7:].strip())

    def bad_json(self) -> ErrorReply:
        """The OpenAI "could not parse the JSON body" 400."""
        return OpenAIChat(self.fixtures).bad_json()

    def error_reply(self, status: int, message: str | None = None) -> ErrorReply:
        """Captured body for 400 (Responses), 401/404 (OpenAI); synthesized OpenAI envelope otherwise."""
        if status == 400 and message is None:
            synthesized = error_body("Invalid request.", "invalid_request_error")
            return ErrorReply(400, self.fixtures.read_or(_CAPTURE_400, synthesized))
        return OpenAIChat(self.fixtures).error_reply(status, message)

    def bind_state(self, body: dict[str, Any], headers: dict[str, str], prompt: Prompt) -> ErrorReply | None:
        """Refuse another organisation's state (``responses_state.state_error``); note the org, the
        reasoning ask and ``store`` for :meth:`render`."""
        org = org_of(headers)
        refused = state_error(body, org)
        if refused is not None:
            return refused
        include = body.get("include")
        encrypted = isinstance(include, list) and "reasoning.encrypted_content" in include
        prev = body.get("previous_response_id")
        prompt.state = {"org": org, "reasoning": encrypted or isinstance(body.get("reasoning"), dict),
                        "encrypted": encrypted, "store": body.get("store") is not False,
                        "previous_response_id": prev if isinstance(prev, str) else None}
        return None

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        """Validate ``model``/``input`` as the API does and read the prompt (see :class:`~.reply.Prompt`)."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            msg = "Missing required parameter: 'model'."
            return ErrorReply(
                400, error_body(msg, "invalid_request_error", "model", "missing_required_parameter")
            )
        inp = body.get("input")
        items: list[Any] = [{"role": "user", "content": inp}] if isinstance(inp, str) else inp or []
        if not isinstance(items, list):
            msg = "Invalid type for 'input': expected one of a string or array of input items."
            return ErrorReply(400, error_body(msg, "invalid_request_error", "input", "invalid_type"))
        chars = len(body.get("instructions") or "") if isinstance(body.get("instructions"), str) else 0
        last_user, tool_result = "", None
        for it in items:
            if not isinstance(it, dict):
                continue
            t = it.get("type")
            if t == "function_call_output":
                out = it.get("output")
                tool_result = out if isinstance(out, str) else text_of(out)
                chars += len(tool_result)
            elif t == "function_call":
                chars += len(str(it.get("arguments", "")))
                tool_result = None
            elif t in (None, "message"):
                text = text_of(it.get("content"))
                chars += len(text) + 4
                if it.get("role") == "user":
                    last_user, tool_result = text, None
                elif it.get("role") == "assistant":
                    tool_result = None
        last = items[-1] if items and isinstance(items[-1], dict) else {}
        if last.get("type") != "function_call_output":
            tool_result = None
        tools = [
            ToolSpec(t["name"], t["parameters"] if isinstance(t.get("parameters"), dict) else {})
            for t in body.get("tools") or ()
            if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str)
        ]
        cap = body.get("max_output_tokens")
        return Prompt(
            model=model,
            stream=body.get("stream") is True,
            max_tokens=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
            last_user_text=last_user,
            tool_result=tool_result,
            tools=tools,
            tool_choice=_tool_choice(body.get("tool_choice")),
            prompt_chars=chars,
        )

    @staticmethod
    def _usage(reply: Reply) -> dict[str, Any]:
        return {
            "input_tokens": reply.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }

    @staticmethod
    def _response(rid: str, created: int, prompt: Prompt, body_tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The ``response`` object with the request settings echoed (key order of ``text-stream``)."""
        choice: Any = prompt.tool_choice
        if choice not in ("auto", "none", "required"):
            choice = {"type": "function", "name": choice}
        return {
            "id": rid,
            "object": "response",
            "created_at": created,
            "status": "in_progress",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": prompt.max_tokens,
            "max_tool_calls": None,
            "model": prompt.model,
            "output": [],
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "prompt_cache_key": None,
            "prompt_cache_retention": None,
            "reasoning": {"effort": None, "summary": None},
            "safety_identifier": None,
            "service_tier": "default",
            "store": True,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": choice,
            "tools": body_tools,
            "top_logprobs": 0,
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": {},
        }

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        """``response`` JSON, or the typed event stream ``response.created`` … ``response.completed``."""
        rid = _hex_id("resp_", seq, "resp")
        created = int(time.time())
        tools = [
            {
                "type": "function",
                "description": None,
                "name": t.name,
                "parameters": t.schema,
                "strict": True,
            }
            for t in prompt.tools
        ]
        base = self._response(rid, created, prompt, tools)
        state = prompt.state or {}
        if state.get("previous_response_id"):
            base["previous_response_id"] = state["previous_response_id"]
        if state and not state["store"]:
            base["store"] = False
        elif state:
            remember(state["org"], rid)
        thought = None
        if state.get("reasoning"):
            thought = reasoning_item(_hex_id("rs_", seq, "rs"), state["org"],
                                     f"Considering: {prompt.last_user_text[:40]}", state["encrypted"])
        call = reply.tool_call
        if call:
            item: dict[str, Any] = {
                "type": "function_call",
                "id": _hex_id("fc_", seq, "fc"),
                "call_id": mint_id("call_", seq, 24, salt="call"),
                "name": call.name,
                "arguments": call.arguments_json,
                "status": "completed",
            }
        else:
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": reply.text}
            item = {
                "id": _hex_id("msg_", seq, "msg"),
                "type": "message",
                "status": "incomplete" if reply.finish == "length" else "completed",
                "content": [part],
                "role": "assistant",
            }
        final = dict(base)
        if reply.finish == "length":
            final["status"] = "incomplete"
            final["incomplete_details"] = {"reason": "max_output_tokens"}
        else:
            final["status"] = "completed"
        final["output"] = [item] if thought is None else [thought, item]
        final["usage"] = self._usage(reply)
        if not prompt.stream:
            return Rendered(_JSON, body=orjson.dumps(final, option=orjson.OPT_INDENT_2))
        frames: list[bytes] = []

        def event(etype: str, **fields: Any) -> None:
            payload = {"type": etype, "sequence_number": len(frames), **fields}
            frames.append(b"event: " + etype.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n")

        event("response.created", response=base)
        event("response.in_progress", response=base)
        at = 0
        if thought is not None:
            event("response.output_item.added", output_index=0, item={**thought, "summary": []})
            event("response.output_item.done", output_index=0, item=thought)
            at = 1
        if call:
            added = {**item, "arguments": "", "status": "in_progress"}
            ids = {"item_id": item["id"], "output_index": at}
            event("response.output_item.added", output_index=at, item=added)
            for frag in _split_args(call.arguments_json):
                event("response.function_call_arguments.delta", **ids, delta=frag)
            event("response.function_call_arguments.done", **ids, arguments=call.arguments_json)
        else:
            ids = {"item_id": item["id"], "output_index": at, "content_index": 0}
            event(
                "response.output_item.added",
                output_index=at,
                item={**item, "status": "in_progress", "content": []},
            )
            event("response.content_part.added", **ids, part={**item["content"][0], "text": ""})
            for n, piece in enumerate(reply.pieces):
                event(
                    "response.output_text.delta", **ids, delta=piece, logprobs=[], obfuscation=_pad(piece, n)
                )
            event("response.output_text.done", **ids, text=reply.text, logprobs=[])
            event("response.content_part.done", **ids, part=item["content"][0])
        event("response.output_item.done", output_index=at, item=item)
        event(
            "response.incomplete" if reply.finish == "length" else "response.completed",
            response=final,
        )
        return Rendered(_SSE, frames=frames)

    def stream_error_frame(self, error: Any) -> bytes:
        """``event: error`` (nested ``error``, ``server_error``), then ``event: response.failed``.

        A dict is sent verbatim as the ``error`` event payload; a string replaces the message.
        """
        if isinstance(error, dict):
            return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"
        message = error if isinstance(error, str) else _STREAM_ERROR
        err = {"type": "server_error", "code": "server_error", "message": message, "param": None}
        failed = {
            "type": "response.failed",
            "response": {
                "id": _hex_id("resp_", 0, "failed"),
                "object": "response",
                "created_at": int(time.time()),
                "status": "failed",
                "error": {"code": "server_error", "message": message},
                "incomplete_details": None,
                "model": "mock",
                "output": [],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": None,
            },
        }
        return (
            b"event: error\ndata: "
            + orjson.dumps({"type": "error", "error": err})
            + b"\n\nevent: response.failed\ndata: "
            + orjson.dumps(failed)
            + b"\n\n"
        )

    def sse_frame(self, item: Any) -> bytes:
        """Scripted item: a dict with a string ``type`` gets ``event: <type>``; others are data only."""
        if isinstance(item, dict) and isinstance(item.get("type"), str):
            return b"event: " + str(item["type"]).encode() + b"\ndata: " + orjson.dumps(item) + b"\n\n"
        frame: bytes = super().sse_frame(item)
        return frame
