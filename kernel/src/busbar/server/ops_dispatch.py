"""Serve a non-chat operation (embeddings & co.) from its ingress route through the pool walk.

Called by the data plane for a route with ``Route.op`` (``busbar.server.routes``):

- ``not_served(route, dialect) -> Reply | None``: before the body is read as JSON (audio uploads are
  multipart): an operation this build does not serve answers a native 404 naming it (image edits
  and variations their own "not supported" 404); ``None`` for a served one.
- ``operation_of(route, dialect, body) -> Operation | Reply | None``: the parsed body of an operation
  route read into the operation's IR (a malformed body: a 400 naming the field, in the caller's
  envelope); ``None`` for a chat body on Bedrock ``/invoke`` (served as chat).
- ``upload_of(route, dialect, raw, headers) -> (body, Operation) | Reply``: an audio upload
  (``UPLOADS``: multipart, read instead of the JSON parse): ``{"model": ...}`` and its
  ``busbar.proxy.audio.AudioOperation`` (the file stays a span of ``raw``), or a 400 naming the field.
- ``serve_operation(gw, call, target, receive) -> Reply | None``: after the data plane resolved the
  target exactly as for chat (``model`` in the body or the path; unknown: 404) and set ``call.op``:
  a target with no lane able to serve the operation (``busbar.proxy.operation.Operation.able``,
  fallback pools included) answers a native 404 naming the operation before any upstream work;
  otherwise ``gw.limiter`` (groups, rate card: ``busbar.limits``) admits it and settles it at the end
  like chat (embeddings' input tokens are charged at ``input_utok``), and ``forward`` runs the same
  walk as chat: weighting, breakers, failover before the first byte, ``on_exhausted``, hooks.
  ``call.record.extra`` gets ``operation`` (the name) and ``op_usage``
  (``busbar.ir.ops.OpUsage`` of a served reply) for the limits engine and the access log.

Source: docs/beyond-chat.md.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from busbar.proto.base import ErrorKind
from busbar.proto.errors import ProtoError
from busbar.proto.ops import codec
from busbar.proto.ops.audio import parse_form
from busbar.proxy.audio import AudioOperation
from busbar.proxy.engine import forward
from busbar.proxy.operation import Operation
from busbar.proxy.relay import error_reply
from busbar.proxy.runtime import Lane, Pool
from busbar.server.asgi_io import run_cancellable

if TYPE_CHECKING:
    from starlette.types import Receive

    from busbar.proto.base import Dialect
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.relay import Reply
    from busbar.proxy.translate import Call
    from busbar.server.routes import Route

SERVED = frozenset({"embeddings", "rerank", "moderation", "images", "invoke", "audio.transcriptions",
                    "audio.translations", "audio.speech"})
"""``Route.op`` values this build serves (``invoke``: decided by the Bedrock body)."""

UPLOADS = frozenset({"audio.transcriptions", "audio.translations"})
"""``Route.op`` values whose body is a multipart upload, not JSON (``upload_of``)."""

_UNSUPPORTED = {"images.edits": "image edits", "images.variations": "image variations"}
_PROTOCOL = {"bedrock-invoke": "bedrock"}


def not_served(route: Route, dialect: Dialect) -> Reply | None:
    """A native 404 for an operation route this build does not serve, else ``None``."""
    if route.op in SERVED:
        return None
    what = _UNSUPPORTED.get(route.op)
    if what is not None:
        return error_reply(dialect, 404, ErrorKind.NOT_FOUND,
                           f"{what} are not supported: busbar routes image generation only "
                           f"(/v1/images/generations); see docs/beyond-chat.md")
    return error_reply(dialect, 404, ErrorKind.NOT_FOUND, _not_served_text(route.op))


def _not_served_text(op: str) -> str:
    return f"the {op} operation is not served by this busbar build; see docs/beyond-chat.md"


def invoke_operation(body: dict[str, Any]) -> str | None:
    """The operation of a Bedrock ``/invoke`` body: ``embeddings`` (Titan ``inputText``, Cohere
    ``texts``), ``rerank`` (``query`` + ``documents``), ``images`` (``textToImageParams``),
    ``None`` for anything else (an Anthropic Messages body: chat)."""
    if "messages" in body:
        return None
    if "inputText" in body or "texts" in body:
        return "embeddings"
    if "query" in body and "documents" in body:
        return "rerank"
    if "textToImageParams" in body or body.get("taskType") == "TEXT_IMAGE":
        return "images"
    return None


def operation_of(route: Route, dialect: Dialect, body: dict[str, Any]) -> Operation | Reply | None:
    """The operation of a parsed body on an operation route: its ``Operation`` (IR read), a 400 in
    the caller's envelope for a malformed body, or ``None`` (chat: an Anthropic body on ``/invoke``)."""
    op_name = invoke_operation(body) if route.op == "invoke" else route.op
    if op_name is None:
        return None
    if op_name not in SERVED:
        return error_reply(dialect, 404, ErrorKind.NOT_FOUND, _not_served_text(op_name))
    ingress = codec(op_name.split(".", 1)[0], _PROTOCOL.get(dialect.name, dialect.name))
    if ingress is None:        # a route whose protocol has no codec for the operation
        return error_reply(dialect, 404, ErrorKind.NOT_FOUND, f"the {op_name} operation is not served on this route")
    try:
        req = ingress.read_request(body, route.method)
    except ProtoError as e:
        return error_reply(dialect, e.status, e.kind, e.message)
    if op_name == "audio.speech":
        return AudioOperation("speech", ingress, req)
    return Operation(op_name, ingress, req, route.method)


def upload_of(route: Route, dialect: Dialect, raw: bytes,
              headers: Iterable[tuple[bytes, bytes]]) -> tuple[dict[str, Any], Operation] | Reply:
    """An audio upload (``route.op`` in ``UPLOADS``; the body is multipart, never parsed as JSON):
    ``({"model": name}, its AudioOperation)`` for the data plane's usual target lookup, or a 400 in
    the caller's envelope naming the fault (``busbar.proto.ops.audio.parse_form``)."""
    ctype = next((v.decode("latin-1") for k, v in headers if k == b"content-type"), "")
    try:
        form = parse_form(raw, ctype)
    except ProtoError as e:
        return error_reply(dialect, e.status, e.kind, e.message)
    ingress = codec("audio", "openai")
    assert ingress is not None
    op = AudioOperation(route.op.removeprefix("audio."), ingress, form.fields, form, raw, ctype)
    return {"model": form.fields["model"]}, op


async def serve_operation(gw: Gateway, call: Call, target: Pool | Lane, receive: Receive) -> Reply | None:
    """Serve ``call`` (``call.op`` set) against ``target``: a native 404 naming the operation when no
    lane of it can serve it, else the walk (``None``: the client went away)."""
    assert call.op is not None
    why = _unservable(gw, call.op, target)
    if why is not None:
        return error_reply(call.ingress, 404, ErrorKind.NOT_FOUND, why)
    if call.op.binary:               # audio speech: the answer's bytes stream (busbar.proxy.audio)
        call.stream = True
    if gw.limiter is not None:          # groups and the rate card admit and settle it like chat
        reply = await gw.limiter.serve(gw, call, target, lambda t: run_cancellable(receive, forward(gw, call, t)))
    else:
        reply = await run_cancellable(receive, forward(gw, call, target))
    if call.record is not None:      # for the limits engine and the access log (busbar.proxy.record)
        call.record.extra["operation"] = call.op.name
        if reply is not None and reply.op_usage is not None:
            call.record.extra["op_usage"] = reply.op_usage
    return reply


def _unservable(gw: Gateway, op: Operation, target: Pool | Lane) -> str | None:
    """Why no lane of ``target`` (a pool with its fallback pools, or a model) can serve ``op``."""
    if isinstance(target, Lane):
        why = op.able(target)
        return None if why is None else f"the model '{target.name}' cannot serve {op.name}: {why}"
    seen: set[str] = set()
    pool: Pool | None = target
    while pool is not None and pool.name not in seen:
        seen.add(pool.name)
        if len(op.unable(pool)) < len(pool.members):
            return None
        pool = gw.pools.get(pool.fallback) if pool.fallback else None
    return (f"pool '{target.name}' has no member that can serve {op.name} (declare it in the member "
            f"models' operations, or add a model whose protocol serves {op.name})")
