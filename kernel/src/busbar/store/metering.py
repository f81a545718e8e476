"""Per-request metering: one :class:`~busbar_sdk.store.MeteringDelta` per request into the write-behind.

``metering_finisher(gw) -> Finisher`` is a process-wide request finisher (``AppState.finishers``,
registered by ``server/lifecycle.py``). When a request that reached an upstream ends, it adds to the
``(UTC day, key id, model, provider)`` metering row through ``gw.flusher.add_metering`` (a dict
merge: no I/O, nothing waits for the store):

- ``day``: the UTC day the request arrived; ``key_id``: ``record.identity.principal`` (the front
  door's caller), else :data:`ANONYMOUS` on an open front door;
- ``model``: the lane that served the reply (else the last lane tried); ``provider``: that lane's
  provider (an ad-hoc ``/{provider}/{model}/...`` route's provider for an ad-hoc lane);
- tokens by tier from the reply's usage (``input``, ``output``, ``cache_read``, ``cache_write``);
  ``requests`` 1, ``billable_requests`` 1 when the reply succeeded (2xx, a stream that ended
  cleanly); ``key_group_at_use``: the caller's group, if any;
- a served non-chat reply's operation units (images, audio milliseconds, speech characters, rerank
  search units) as rows of their own, model ``"<lane>#<unit>"`` with the count in ``input``
  (``unit_deltas``; the usage report folds them into the lane's row).

A request that never reached an upstream (a 4xx of the front door or the router) consumed nothing
and adds no row. Metering is observability (``busbar store prune`` trims old days); it is never read
for enforcement. See docs/stores.md#metering.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from busbar_sdk.store import MeteringDelta, day_of

from busbar.limits.units import unit_entries

if TYPE_CHECKING:
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.record import Finisher, RequestRecord

__all__ = ["ANONYMOUS", "metering_delta", "metering_finisher", "unit_deltas"]

ANONYMOUS = "-"
"""The metering key id of a request no front door identified (``auth.chain: []``)."""


def _provider(gw: Gateway, lane: str, path: str) -> str:
    known = gw.lanes.get(lane)
    if known is not None:
        return known.provider.name
    head = path.lstrip("/").split("/", 1)[0]          # an ad-hoc route: /{provider}/{model}/v1/...
    return head if head in gw.providers else ANONYMOUS


def metering_delta(gw: Gateway, record: RequestRecord) -> MeteringDelta | None:
    """The metering row ``record`` adds, or ``None`` when the request reached no upstream."""
    lane = record.lane or (record.attempts[-1].lane if record.attempts else None)
    if lane is None:
        return None
    identity = record.identity
    usage = record.usage
    return MeteringDelta(
        day=day_of(int(record.started_wall)),
        key_id=getattr(identity, "principal", None) or ANONYMOUS,
        model=lane, provider=_provider(gw, lane, record.path),
        input=usage.input_tokens, output=usage.output_tokens, cache_read=usage.cache_read_tokens,
        cache_write=usage.cache_write_tokens, requests=1, billable_requests=int(record.outcome == "ok"),
        key_group_at_use=getattr(identity, "group", None) or "")


def unit_deltas(delta: MeteringDelta, record: RequestRecord) -> list[MeteringDelta]:
    """The operation units a served non-chat reply used, as rows of their own beside ``delta``
    (its row's day, key, provider and group): model ``"<lane>#<unit>"`` (busbar.limits.cost),
    the count in ``input``, no requests. Empty for chat and for a reply that failed."""
    if record.outcome != "ok":
        return []
    return [replace(delta, model=name, input=count.input, output=0, cache_read=0, cache_write=0, requests=0,
                    billable_requests=0)
            for name, count in unit_entries(delta.model, record.extra.get("op_usage")).items()]


def metering_finisher(gw: Gateway) -> Finisher:
    """A finisher adding each request's :func:`metering_delta` (and its :func:`unit_deltas`) to
    ``gw.flusher`` (no I/O)."""
    def meter(record: RequestRecord) -> None:
        delta = metering_delta(gw, record)
        if delta is not None:
            gw.flusher.add_metering(delta)
            for extra in unit_deltas(delta, record) if "op_usage" in record.extra else ():
                gw.flusher.add_metering(extra)
    return meter
