"""IR -> Bedrock Converse request body (``write_request``), Busbar as the client.

The model id goes in the URL (``egress_request``), so the body carries none; neither does it
carry a stream flag (``/converse`` vs ``/converse-stream``). Rules:

- Never an empty collection (case C011): no ``system: []``, no ``inferenceConfig: {}``, no
  ``toolConfig`` without tools, no empty ``stopSequences``. ``maxTokens`` is written only when the
  request has one (Converse does not require it; ``requires_max_tokens`` is False).
- Tool-call ids and tool names that break Bedrock's ``[a-zA-Z0-9_-]{1,64}`` get deterministic
  aliases (``names``): a call and its result always agree, and the answer's tool names are
  mapped back (case C048). History that holds tool blocks but no ``tools`` gets minimal
  ``toolSpec`` entries (Bedrock refuses tool blocks without a ``toolConfig``). ``tool_choice``
  ``none`` has no Converse form: the tools stay, the choice is dropped (named in ``dropped``).
- Cache breakpoints (``cache_control``) become a ``cachePoint`` after the block only when the
  lane declares ``prompt_caching`` (``prompt_caching=True``): Nova hard-rejects the marker, so by
  default they are dropped and named in ``dropped`` (``prompt_caching``, docs/config-at-a-glance.md#models).
- Reasoning is Claude-on-Bedrock's ``additionalModelRequestFields.thinking`` ``{type: enabled,
  budget_tokens}`` with the Anthropic writer's budget rules (effort table, minimum 1024, clamp
  under ``maxTokens`` when known); with thinking, ``temperature``/``top_k`` are omitted and
  ``topP`` below 0.95 too. ``top_k`` otherwise goes to ``additionalModelRequestFields.top_k``.
- Documents: ``format`` from the MIME type (pdf, csv, doc, docx, xls, xlsx, html, txt, md) and a
  ``name`` that meets Bedrock's character rules (no dot, no extension: ``invoice.pdf`` ->
  ``invoice``). Audio, video and URL-only parts are refused with a 400 naming the part (case C040).
- Images: png, jpeg, gif, webp as ``source.bytes``; an ``s3://`` URL as ``s3Location``; other URLs
  are refused (Busbar does not fetch).
- Thinking blocks keep their signature; unsigned thinking (another protocol's) is dropped;
  redacted thinking goes back as ``redactedContent``. Empty text blocks are skipped (Bedrock
  rejects blank text).
- ``frequency_penalty``, ``presence_penalty``, ``seed``, ``response_format``, ``user`` and
  ``parallel_tool_calls: false`` have no Converse field: dropped and named.

docs/config-at-a-glance.md#models (``prompt_caching``, ``reasoning``); cases C011,
C017, C040, C048.
"""

from __future__ import annotations

import re
from typing import Any

from busbar.ir.model import (
    DocumentBlock,
    ImageBlock,
    IrBlock,
    IrRequest,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from busbar.proto.anthropic.request_writer import sampling_with_thinking, thinking_budget
from busbar.proto.bedrock.names import alias, wire_name
from busbar.proto.bedrock.request import DOCUMENT_FORMATS, IMAGE_FORMATS
from busbar.proto.errors import BadRequest
from busbar.proto.writer import drop, put_present

_CACHE_POINT = {"cachePoint": {"type": "default"}}
_IMAGE_FORMAT = {v: k for k, v in IMAGE_FORMATS.items()} | {"image/jpg": "jpeg"}
_DOC_FORMAT = {v: k for k, v in DOCUMENT_FORMATS.items()} | {"text/x-markdown": "md"}
_DOC_NAME_BAD = re.compile(r"[^A-Za-z0-9\s\-()\[\]]+")
_SPACES = re.compile(r"\s+")
_NO_BUDGET_CAP = 1 << 30


def _inference_config(req: IrRequest, budget: int | None, dropped: list[str]) -> dict[str, Any]:
    """``inferenceConfig``: ``maxTokens``, ``temperature``/``topP`` (as thinking allows, see
    ``sampling_with_thinking``), ``stopSequences``, under a same-protocol client's other keys."""
    ic: dict[str, Any] = {}
    temperature, top_p = sampling_with_thinking(req, budget, dropped)
    put_present(ic, (("maxTokens", req.max_tokens), ("temperature", temperature), ("topP", top_p),
                     ("stopSequences", req.stop or None)))
    more_ic = req.extra.get("inferenceConfig")
    return {**more_ic, **ic} if isinstance(more_ic, dict) else ic


class _Ctx:
    __slots__ = ("caching", "docs", "dropped", "tool_names")

    def __init__(self, dropped: list[str], caching: bool):
        self.dropped = dropped
        self.caching = caching
        self.docs = 0
        self.tool_names: dict[str, None] = {}


def document_name(name: str | None, n: int) -> str:
    """A Bedrock-valid document name: extension cut, other characters folded to spaces/hyphens.

    Bedrock allows letters, digits, single whitespace, hyphens, parentheses and square brackets.
    ``None`` or an empty result gives ``document-<n>``.
    """
    if name:
        stem = name.rsplit("/", 1)[-1]
        if "." in stem:
            stem = stem.rsplit(".", 1)[0]
        stem = _SPACES.sub(" ", _DOC_NAME_BAD.sub("-", stem)).strip(" -")
        if stem:
            return stem[:200]
    return f"document-{n}"


def write_request(req: IrRequest, upstream_model: str, *, prompt_caching: bool = False) -> dict[str, Any]:
    """``IrRequest`` -> Converse body (the model id goes in the URL, never the body).

    Args:
        req: the request; ``req.dropped`` gains the names of fields that could not be carried.
        upstream_model: the lane's wire model id (unused in the body; part of the seam).
        prompt_caching: the lane's ``prompt_caching`` flag: write ``cachePoint`` markers.

    Returns:
        The JSON-ready body (shares leaf values with ``req``; do not mutate it in place).

    Raises:
        BadRequest: a part Converse cannot take (audio, video, an unsupported image or document
            type, a URL-only part, tool arguments that are not a JSON object).
    """
    ctx = _Ctx(req.dropped, prompt_caching)
    msgs: list[dict[str, Any]] = []
    for m in req.messages:
        content = _blocks(m.content, ctx)
        if content:
            msgs.append({"role": m.role, "content": content})
    body: dict[str, Any] = {"messages": msgs}
    if req.system:
        system = _blocks(req.system, ctx, system=True)
        if system:
            body["system"] = system
    max_tokens = req.max_tokens
    budget = thinking_budget(req, max_tokens if max_tokens is not None else _NO_BUDGET_CAP)
    tc = req.tool_choice
    forced = tc is not None and req.tools and tc.mode in ("required", "tool")
    if budget is not None and forced:
        budget = None
    if req.reasoning is not None and budget is None:
        drop(ctx.dropped, "reasoning")
    extra = req.extra
    ic = _inference_config(req, budget, ctx.dropped)
    if ic:
        body["inferenceConfig"] = ic
    tool_config = _tool_config(req, ctx)
    if tool_config is not None:
        body["toolConfig"] = tool_config
    amrf: dict[str, Any] = {}
    more = extra.get("additionalModelRequestFields")
    if isinstance(more, dict):
        amrf.update(more)
    if budget is not None:
        amrf["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if req.top_k is not None:
        if budget is None:
            amrf["top_k"] = req.top_k
        else:
            drop(ctx.dropped, "top_k")
    if amrf:
        body["additionalModelRequestFields"] = amrf
    for name in ("frequency_penalty", "presence_penalty", "seed", "response_format", "user"):
        if getattr(req, name) is not None:
            drop(ctx.dropped, name)
    if req.parallel_tool_calls is False:
        drop(ctx.dropped, "parallel_tool_calls")
    for k, v in extra.items():
        if (
            k not in body
            and k not in ("inferenceConfig", "additionalModelRequestFields")
            and not k.startswith("__busbar_")
        ):
            body[k] = v
    return body


def _tool_config(req: IrRequest, ctx: _Ctx) -> dict[str, Any] | None:
    tools: list[dict[str, Any]] = []
    declared = set()
    for t in req.tools:
        spec: dict[str, Any] = {"name": wire_name(t.name)}
        if t.description:
            spec["description"] = t.description
        spec["inputSchema"] = {"json": t.input_schema}
        tools.append({"toolSpec": spec})
        declared.add(t.name)
        if t.cache_control is not None:
            if ctx.caching:
                tools.append(dict(_CACHE_POINT))
            else:
                drop(ctx.dropped, "cache_control")
    for name in ctx.tool_names:  # tool blocks in history need a toolConfig naming them
        if name not in declared:
            spec = {"name": wire_name(name), "inputSchema": {"json": {"type": "object", "properties": {}}}}
            tools.append({"toolSpec": spec})
    if not tools:
        return None
    out: dict[str, Any] = {"tools": tools}
    tc = req.tool_choice
    if tc is not None and req.tools:
        if tc.mode == "required":
            out["toolChoice"] = {"any": {}}
        elif tc.mode == "tool" and tc.name:
            out["toolChoice"] = {"tool": {"name": wire_name(tc.name)}}
        elif tc.mode == "auto":
            out["toolChoice"] = {"auto": {}}
        else:
            drop(ctx.dropped, "tool_choice")
    return out


def _blocks(blocks: list[IrBlock], ctx: _Ctx, system: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        if system and not isinstance(b, TextBlock):
            drop(ctx.dropped, "system." + b.type)
            continue
        w = _block(b, ctx)
        if w is not None:
            out.append(w)
        if b.cache_control is not None:
            if ctx.caching and out:
                out.append(dict(_CACHE_POINT))
            elif not ctx.caching:
                drop(ctx.dropped, "cache_control")
    return out


def _block(b: IrBlock, ctx: _Ctx) -> dict[str, Any] | None:
    if isinstance(b, TextBlock):
        return {"text": b.text} if b.text else None
    if isinstance(b, ToolUseBlock):
        inp = b.input
        if not isinstance(inp, dict):
            if inp is not None:
                raise BadRequest(
                    f"tool call {b.id!r} ({b.name}): arguments must be a JSON object for a Bedrock upstream"
                )
            inp = {}
        ctx.tool_names[b.name] = None
        return {"toolUse": {"toolUseId": alias(b.id), "name": wire_name(b.name), "input": inp}}
    if isinstance(b, ToolResultBlock):
        if b.name:
            ctx.tool_names[b.name] = None
        content: list[dict[str, Any]] = []
        for c in b.content:
            if isinstance(c, TextBlock):
                content.append({"text": c.text})
            elif isinstance(c, (ImageBlock, DocumentBlock)):
                w = _block(c, ctx)
                if w is not None:
                    content.append(w)
            else:
                drop(ctx.dropped, "tool_result." + c.type)
        tr: dict[str, Any] = {"toolUseId": alias(b.tool_use_id), "content": content}
        if b.is_error:
            tr["status"] = "error"
        return {"toolResult": tr}
    if isinstance(b, ThinkingBlock):
        if b.redacted:
            return {"reasoningContent": {"redactedContent": b.data or ""}}
        if b.signature is None:
            drop(ctx.dropped, "thinking (unsigned)")
            return None
        return {"reasoningContent": {"reasoningText": {"text": b.text, "signature": b.signature}}}
    if isinstance(b, ImageBlock):
        return {"image": _image(b)}
    if isinstance(b, DocumentBlock):
        return {"document": _document(b, ctx)}
    drop(ctx.dropped, getattr(b, "type", "block"))
    return None


def _image(b: ImageBlock) -> dict[str, Any]:
    if b.source == "url":
        url = b.url or ""
        if not url.startswith("s3://"):
            raise BadRequest(
                "image part given by URL cannot be sent to a Bedrock upstream (inline base64 or s3:// only)"
            )
        ext = url.rsplit(".", 1)[-1].lower().replace("jpg", "jpeg")
        fmt = _IMAGE_FORMAT.get(b.media_type or "") or ext
        if fmt not in IMAGE_FORMATS:
            raise BadRequest(
                f"image part {url!r}: format unknown for a Bedrock upstream (png, jpeg, gif, webp)"
            )
        return {"format": fmt, "source": {"s3Location": {"uri": url}}}
    inline = _IMAGE_FORMAT.get((b.media_type or "").lower())
    if inline is None:
        raise BadRequest(
            f"image part ({b.media_type}) cannot be sent to a Bedrock upstream (png, jpeg, gif, webp only)"
        )
    return {"format": inline, "source": {"bytes": b.data}}


def _document(b: DocumentBlock, ctx: _Ctx) -> dict[str, Any]:
    mt = b.media_type.lower()
    if mt.startswith(("audio/", "video/")):
        raise BadRequest(f"{mt.split('/')[0]} part ({mt}) cannot be sent to a Bedrock upstream")
    fmt = _DOC_FORMAT.get(mt.split(";", 1)[0].strip())
    if fmt is None:
        raise BadRequest(
            f"document part ({mt}) cannot be sent to a Bedrock upstream "
            "(pdf, csv, doc, docx, xls, xlsx, html, txt, md)"
        )
    ctx.docs += 1
    if b.data is None:
        if not (b.url or "").startswith("s3://"):
            raise BadRequest(
                f"document part ({mt}) given by URL cannot be sent to a Bedrock upstream "
                "(inline base64 or s3:// only)"
            )
        source: dict[str, Any] = {"s3Location": {"uri": b.url}}
    else:
        source = {"bytes": b.data}
    return {"format": fmt, "name": document_name(b.name, ctx.docs), "source": source}
