"""One upstream attempt: build the request for one member, send it, and read up to the commit point.

The commit point is the first byte the client will see. Before it, every failure is returned as
an ``AttemptFailure`` so the walk can fail over inside the same request: connect errors, the
per-attempt time-to-headers cap, non-2xx answers, a body that breaks before it is read, and a
stream whose first decoded event is an error. After it, the stream is owned by ``relay``.

Per-attempt timeout (seeds 001 "Per-attempt timeouts"): ``attempt_timeout_ms`` (member wins
over model) caps connect + time to response headers only, floored by the remaining failover
budget; expiry is a transient failure with disposition ``attempt_timeout``.

Source: seeds 001 "failover", "Per-attempt timeouts", "models"; ORIGINAL §2.2 request steps.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from busbar.config.schema import LimitsConfig
from busbar.ir.model import StreamError, StreamEvent
from busbar.proto.base import Disposition, StreamDecoder, UpstreamErrorInfo
from busbar.proto.errors import ProtoError
from busbar.proxy.credentials import CredentialError
from busbar.proxy.disposition import classify, parse_retry_after
from busbar.proxy.egress import FORWARDED_SAME_PROTOCOL, prepare, read_upstream_error
from busbar.proxy.runtime import Lane, Member
from busbar.proxy.translate import Call, build_body
from busbar.proxy.upstream import UpstreamError, UpstreamResponse

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
    """A committed 2xx. Non-stream: ``body`` holds the whole upstream body. Stream: ``response``
    is open, ``first`` holds the bytes read so far and ``events`` their decoded IR events."""

    response: UpstreamResponse
    body: bytes | None = None
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
    try:
        url, headers, content = await prepare(gw, provider, lane.upstream_model, call.stream, content)
    except (CredentialError, ValueError) as e:   # ValueError: a malformed credential (e.g. SigV4 pair)
        log.warning("provider %s: %s", provider.name, e)
        return AttemptFailure("auth", 0, UpstreamErrorInfo(None, "upstream credential unavailable"), None,
                              reason="auth")
    if provider.dialect is call.ingress:
        fwd = FORWARDED_SAME_PROTOCOL.get(provider.protocol, ())
        extra = {h: call.headers[h] for h in fwd if h in call.headers}
        if extra:
            headers = {**headers, **extra}
    cap = remaining_s if timeout_ms is None else min(timeout_ms / 1000.0, remaining_s)
    by_attempt_cap = timeout_ms is not None and timeout_ms / 1000.0 <= remaining_s
    try:
        async with asyncio.timeout(cap):       # connect + time to headers; never the body
            resp = await gw.upstream.send("POST", url, headers, content, scope=provider.name)
    except TimeoutError:
        return AttemptFailure("timeout", 0, None, None,
                              reason="attempt_timeout" if by_attempt_cap else "timeout")
    except Exception as e:  # noqa: BLE001 - UpstreamError, the SSRF guard and other connect-time refusals
        return AttemptFailure("network", 0, UpstreamErrorInfo(None, str(e)), None, reason="connect")
    status = resp.status
    if status >= 300:
        return await _failure_from(resp, provider, limits)
    if not call.stream:
        try:
            body = await resp.read()
        except UpstreamError as e:
            await resp.aclose()
            return AttemptFailure("network", 0, UpstreamErrorInfo(None, str(e)), None, reason="connect")
        return AttemptSuccess(resp, body=body, dropped=dropped)
    success = await _read_first(resp, provider)
    if isinstance(success, AttemptSuccess):
        success.dropped = dropped
    return success


async def _failure_from(resp: UpstreamResponse, provider: Provider, limits: LimitsConfig) -> AttemptFailure:
    cap = limits.upstream_error_body_max_bytes
    buf = bytearray()
    try:
        async for chunk in resp.chunks():
            buf += chunk
            if len(buf) >= cap:
                del buf[cap:]
                break
    except UpstreamError:
        pass
    finally:
        await resp.aclose()
    body = bytes(buf)
    info = read_upstream_error(provider.dialect, resp.status, body, resp.headers)
    cls = classify(resp.status, info, provider.error_map)
    ra = parse_retry_after(resp.headers.get("retry-after"), limits.max_honored_retry_after_secs)
    relayed = {k: resp.headers[k] for k in RELAYED_ERROR_HEADERS if k in resp.headers}
    relayed.setdefault("content-type", "application/json")
    return AttemptFailure(cls, resp.status, info, ra, body, relayed, reason=cls)


async def _read_first(resp: UpstreamResponse, provider: Provider) -> AttemptSuccess | AttemptFailure:
    """Read until the stream yields a decoded event (commit) or fails (fail over)."""
    decoder = provider.dialect.stream_decoder()
    it = resp.chunks()
    first: list[bytes] = []
    try:
        while True:
            try:
                chunk = await it.__anext__()
            except StopAsyncIteration:
                events = decoder.close()
                break
            first.append(chunk)
            events = decoder.feed(chunk)
            if events:
                break
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
    if events and isinstance(events[0], StreamError):
        await resp.aclose()
        err = events[0]
        cls = Disposition.of_kind(err.kind)
        return AttemptFailure(cls, 0, UpstreamErrorInfo(err.kind, err.message), None, reason=cls)
    return AttemptSuccess(resp, first=first, events=events, decoder=(decoder, it))
