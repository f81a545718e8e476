"""One upstream attempt: build the request for one member, send it, and read up to the commit point.

The commit point is the first byte the client will see. Before it, every failure is returned as
an ``AttemptFailure`` so the walk can fail over inside the same request: connect errors, the
per-attempt cap, non-2xx answers, a redirect (never followed, never relayed), a 2xx that does not
look like a success (``proxy/success.py``), a body over ``limits.upstream_body_max_bytes``
(decoded bytes counted), a body that breaks before it is read, a stream that ends or runs half of
``upstream_body_max_bytes`` without an event (those bytes are held twice: raw for the relay and in
the decoder), and a stream whose first decoded event is an error.
After it, the stream is owned by ``relay``.

Per-attempt cap: ``attempt_timeout_ms`` (member wins over model), floored by the remaining
failover budget (the budget alone when no ``attempt_timeout_ms`` is set). Nothing has reached the
client before the commit point, so the cap bounds the whole exchange of a non-stream request
(connect, headers and body: a stall or a trickle after the headers fails over) and a stream up to
its first event (never the streaming body, case C025). Expiry is a transient failure with
disposition ``attempt_timeout`` (``timeout`` when the budget was the smaller bound).

Source: docs/reliability.md ("The walk and the first-byte boundary").
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from busbar.auth.passthrough import caller_fault, caller_headers
from busbar.config.schema import LimitsConfig
from busbar.ir.model import StreamError, StreamEvent
from busbar.proto.base import Disposition, StreamDecoder, UpstreamErrorInfo
from busbar.proto.errors import ProtoError
from busbar.proxy.credentials import CredentialError
from busbar.proxy.disposition import classify, parse_retry_after
from busbar.proxy.egress import FORWARDED_SAME_PROTOCOL, prepare, read_upstream_error
from busbar.proxy.runtime import Lane, Member
from busbar.proxy.success import json_verdict, stream_verdict
from busbar.proxy.translate import Call, build_body
from busbar.proxy.upstream import Body, BodyTooLarge, UpstreamError, UpstreamResponse, read_capped

if TYPE_CHECKING:
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.runtime import Provider

log = logging.getLogger("busbar")

# Upstream error headers a same-protocol client needs to parse the error (Bedrock's exception name
# travels in x-amzn-errortype); framing headers are never among them (case C052).
RELAYED_ERROR_HEADERS = ("content-type", "x-amzn-errortype", "x-amzn-requestid", "retry-after",
                         "request-id", "x-request-id")


@dataclass(slots=True)
class AttemptFailure:
    """A pre-first-byte failure. ``cls``: disposition class; ``status``: upstream HTTP status
    (0 for transport failures); ``body``/``headers``: the upstream error answer, for relaying."""

    cls: str
    status: int
    info: UpstreamErrorInfo | None
    retry_after: float | None
    body: bytes = b""
    headers: dict[str, str] | None = None   # the relayable upstream error headers (RELAYED_ERROR_HEADERS)
    reason: str = ""          # metrics reason: attempt_timeout | connect | transient_upstream | …


@dataclass(slots=True)
class AttemptSuccess:
    """A committed 2xx. Non-stream: ``body`` holds the whole upstream body, ``doc`` its parse. Stream: ``response``
    is open, ``first`` holds the bytes read so far and ``events`` their decoded IR events."""

    response: UpstreamResponse
    body: bytes | None = None
    doc: dict[str, Any] | None = None       # the parsed non-stream body (checked by ``success.json_verdict``)
    first: list[bytes] | None = None
    events: list[StreamEvent] | None = None
    decoder: tuple[StreamDecoder, AsyncIterator[bytes]] | None = None
    dropped: list[str] | None = None


async def attempt(gw: Gateway, call: Call, member_or_lane: Member | Lane,
                  remaining_s: float) -> AttemptSuccess | AttemptFailure:
    """Run one attempt against a lane; never raises for upstream faults (returns a failure)."""
    lane = member_or_lane.lane if isinstance(member_or_lane, Member) else member_or_lane
    timeout_ms = member_or_lane.attempt_timeout_ms
    reasoning = member_or_lane.reasoning
    provider = lane.provider
    limits = gw.limits
    try:
        content, dropped = build_body(call, lane, reasoning, limits)
    except ProtoError as e:          # the client's request cannot be written for this lane
        return AttemptFailure("client_error", e.status, UpstreamErrorInfo(None, e.message), None,
                              reason="client_error")
    except (TypeError, ValueError, KeyError, AttributeError) as e:   # malformed field values
        log.info("request for %s cannot be translated: %r", lane.name, e)
        return AttemptFailure("client_error", 400, UpstreamErrorInfo(
            None, "the request cannot be translated for this model: a field has the wrong type or shape"), None,
            reason="client_error")
    if dropped and call.strict:
        return AttemptFailure("client_error", 400, UpstreamErrorInfo(
            None, f"translation: strict refuses a lossy hop to {provider.protocol} "
                  f"(lane '{lane.name}'): it would drop {', '.join(dropped)}"), None, reason="client_error")
    sent: Body
    try:
        if call.op is None:
            url, headers, sent = await prepare(gw, provider, lane.upstream_model, call.stream, content)
        else:
            url, headers, sent = await call.op.prepare(gw, provider, lane.upstream_model, content)
    except (CredentialError, ValueError) as e:   # ValueError: a malformed credential (e.g. SigV4 pair)
        log.warning("provider %s: %s", provider.name, e)
        return AttemptFailure("auth", 0, UpstreamErrorInfo(None, "upstream credential unavailable"), None,
                              reason="auth")
    if provider.dialect is call.ingress:
        fwd = FORWARDED_SAME_PROTOCOL.get(provider.protocol, ())
        extra = {h: call.headers[h] for h in fwd if h in call.headers}
        if extra:
            headers = {**headers, **extra}
    passthrough = gw.config.auth.upstream_credentials == "passthrough"
    if passthrough:                  # the caller's own credential instead of the lane's (busbar.auth.passthrough)
        headers = caller_headers(provider, headers, call.headers)
    cap = remaining_s if timeout_ms is None else min(timeout_ms / 1000.0, remaining_s)
    by_attempt_cap = timeout_ms is not None and timeout_ms / 1000.0 <= remaining_s
    resp: UpstreamResponse | None = None
    try:
        # Nothing has reached the client yet: the cap bounds the whole non-stream exchange, and a
        # stream up to its first event (a stall after the headers fails over like any other fault).
        async with asyncio.timeout(cap):
            try:
                resp = await gw.upstream.send("POST", url, headers, sent, scope=provider.name)
            except Exception as e:  # noqa: BLE001 - UpstreamError, the SSRF guard and other connect-time refusals
                return AttemptFailure("network", 0, UpstreamErrorInfo(None, str(e)), None, reason="connect")
            result = await _answer(resp, call, provider, limits, dropped)
            if passthrough and isinstance(result, AttemptFailure) and caller_fault(result.status):
                result.cls = result.reason = "client_error"     # the caller's credential: relay, no penalty
            return result
    except TimeoutError:
        if resp is not None:
            await resp.aclose()
        if by_attempt_cap:
            text = f"lane '{lane.name}' did not answer within attempt_timeout_ms ({timeout_ms} ms)"
        else:
            text = f"lane '{lane.name}' did not answer within the remaining failover budget ({cap:.1f}s)"
        return AttemptFailure("timeout", 0, UpstreamErrorInfo(None, text), None,
                              reason="attempt_timeout" if by_attempt_cap else "timeout")


async def _answer(resp: UpstreamResponse, call: Call, provider: Provider, limits: LimitsConfig,
                  dropped: list[str] | None) -> AttemptSuccess | AttemptFailure:
    """Read an answer up to the commit point; a redirect, a bad 2xx or an oversized body is a fault."""
    status = resp.status
    if 300 <= status < 400:        # never followed (the client has no redirects), never relayed
        await resp.aclose()
        return _upstream_fault(f"a redirect (HTTP {status}); redirects are not followed", status)
    if status >= 300 or status < 200:
        return await _failure_from(resp, provider, limits)
    if call.op is not None and call.op.binary:   # audio speech: commit at the headers, the bytes stream
        reason = call.op.head_verdict(status, resp.headers)
        if reason is not None:
            await resp.aclose()
            return _upstream_fault(reason, status)
        return AttemptSuccess(resp, dropped=dropped)
    if call.stream:
        reason = stream_verdict(status, resp.headers)
        if reason is not None:
            await resp.aclose()
            return _upstream_fault(reason, status)
        # bytes before the first event are held twice (raw for the relay, in the decoder): half the cap
        success = await _read_first(resp, provider, limits.upstream_body_max_bytes // 2)
        if isinstance(success, AttemptSuccess):
            success.dropped = dropped
        return success
    try:
        body = await read_capped(resp, limits.upstream_body_max_bytes)
    except BodyTooLarge:
        return _upstream_fault(f"HTTP {status} with a body over limits.upstream_body_max_bytes "
                               f"({limits.upstream_body_max_bytes} bytes)", status)
    except UpstreamError as e:
        return AttemptFailure("network", 0, UpstreamErrorInfo(None, str(e)), None, reason="connect")
    finally:
        await resp.aclose()
    if call.op is None:
        doc, reason = json_verdict(provider.protocol, status, resp.headers, body)
    else:                            # an operation's own check (audio: a text/srt/vtt answer is one)
        doc, reason = call.op.verdict(provider.protocol, status, resp.headers, body)
    if reason is not None:
        return _upstream_fault(reason, status)
    return AttemptSuccess(resp, body=body, doc=doc, dropped=dropped)


def _upstream_fault(reason: str, status: int) -> AttemptFailure:
    """A transient upstream fault that is not an error answer: fail over like a 5xx."""
    return AttemptFailure("server_error", status, UpstreamErrorInfo(None, f"upstream answered {reason}"),
                          None, reason="server_error")


async def _failure_from(resp: UpstreamResponse, provider: Provider, limits: LimitsConfig) -> AttemptFailure:
    try:
        body = await read_capped(resp, limits.upstream_error_body_max_bytes, truncate=True)
    except UpstreamError:
        body = b""
    finally:
        await resp.aclose()
    info = read_upstream_error(provider.dialect, resp.status, body, resp.headers)
    cls = classify(resp.status, info, provider.error_map)
    ra = parse_retry_after(resp.headers.get("retry-after"), limits.max_honored_retry_after_secs)
    relayed = {k: resp.headers[k] for k in RELAYED_ERROR_HEADERS if k in resp.headers}
    relayed.setdefault("content-type", "application/json")
    return AttemptFailure(cls, resp.status, info, ra, body, relayed, reason=cls)


async def _read_first(resp: UpstreamResponse, provider: Provider, max_bytes: int) -> AttemptSuccess | AttemptFailure:
    """Read until the stream yields a decoded event (commit) or fails (fail over): a break, an
    undecodable stream, an end before any event, or more than ``max_bytes`` without one."""
    decoder = provider.dialect.stream_decoder()
    it = resp.chunks()
    first: list[bytes] = []
    size = 0
    try:
        while True:
            try:
                chunk = await it.__anext__()
            except StopAsyncIteration:
                events = decoder.close() if size else []
                break
            first.append(chunk)
            size += len(chunk)
            events = decoder.feed(chunk)
            if events:
                break
            if size > max_bytes:
                await resp.aclose()
                return _upstream_fault(f"HTTP {resp.status} with a stream of no event in its first "
                                       f"{max_bytes} bytes (half of limits.upstream_body_max_bytes)",
                                       resp.status)
    except UpstreamError as e:
        await resp.aclose()
        return AttemptFailure("network", 0, UpstreamErrorInfo(None, str(e)), None, reason="connect")
    except Exception as e:  # noqa: BLE001 - an undecodable upstream stream is the upstream's fault: fail over
        await resp.aclose()
        log.warning("undecodable stream from %s: %r", provider.name, e)
        return AttemptFailure("server_error", 0, UpstreamErrorInfo(None, "malformed upstream stream"), None,
                              reason="server_error")
    except BaseException:   # cancelled (client gone, C026): the chunk wait is cancel-safe, so close here
        await resp.aclose()
        raise
    if not events:
        await resp.aclose()
        return _upstream_fault(f"HTTP {resp.status} with a stream that ended before its first event",
                               resp.status)
    if isinstance(events[0], StreamError):
        await resp.aclose()
        err = events[0]
        cls = Disposition.of_kind(err.kind)
        return AttemptFailure(cls, 0, UpstreamErrorInfo(err.kind, err.message), None, reason=cls)
    return AttemptSuccess(resp, first=first, events=events, decoder=(decoder, it))
