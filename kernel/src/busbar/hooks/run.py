"""Per-request hook state: the request's projections (built lazily, once) and its tap stages.

A :class:`HookRun` is created only for a request whose pool (or direct route) has gates or taps,
and is kept on ``Call.hooks`` for the rest of the request, so failover hops, a fallback pool and
the end of a stream see the same run. Nothing here exists for a pool without hooks.

- :meth:`message` builds one per-gate message (``op``, ``request``, ``candidates``, ``context``)
  holding exactly what the gate's grant allows: prompt text only under ``prompt: ro|rw``, identity
  only under ``user: ro`` and only on ``decide`` (taps and transforms never carry identity), the
  request headers the hook's settings allowlist (``request.headers``), and a fresh copy per gate.
- :meth:`rewritten` drops the cached projections after a rewrite (every later gate, tap and
  upstream sees the rewritten body).
- Tap stages: :meth:`tap` (request, route), :meth:`attempt`, :meth:`finish` /
  :meth:`stream_done` (completion: ``ok | failed | rejected_by_gate``; append-only).

Source: docs/hooks.md#taps (stages), docs/plugins.md#grants, docs/hooks.md#what-a-hook-receives.
"""
from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from busbar.hooks.bodyshape import body_prompt, body_sizes, body_view
from busbar.hooks.projection import (
    Prompt,
    copy_candidates,
    ir_sizes,
    prompt_view,
    shape_view,
    stage_view,
    user_view,
)

if TYPE_CHECKING:
    from busbar.hooks.specs import TapSpec
    from busbar.proxy.relay import Reply
    from busbar.proxy.translate import Call

__all__ = ["HookRun"]

log = logging.getLogger("busbar.hooks")

_PREFIX = os.urandom(4).hex()
_SEQ = itertools.count(1)


class HookRun:
    """Hook state of one request (see the module docstring)."""

    __slots__ = ("_prompt", "_shape", "_user", "attempts", "call", "completed", "pool", "rejected",
                 "request_id", "taps", "trace", "transformed")

    def __init__(self, call: Call):
        self.call = call
        self.request_id = f"{_PREFIX}-{next(_SEQ)}"
        self._shape: dict[str, dict[str, Any]] = {}
        self._prompt: Prompt | None = None
        self._user: dict[str, str] | None = None
        self.transformed = False
        self.taps: Sequence[TapSpec] = ()
        self.attempts = 0
        self.completed = False
        self.rejected = False
        self.pool = ""
        #: Every gate's reply, in firing order, when someone asked (``busbar route --dry-run``);
        #: shadow gates' replies always land here when it is set (``busbar.hooks.shadow``).
        self.trace: list[dict[str, Any]] | None = None

    # ------------------------------------------------------------------ projections

    def shape(self, pool: str) -> dict[str, Any]:
        """The shape-only ``request`` view for ``pool`` (cached until a rewrite). Its sizes come
        from the client's body when ``busbar.hooks.bodyshape`` reads that shape (no IR built),
        else from the IR; a rewritten request always uses the IR."""
        view = self._shape.get(pool)
        if view is None:
            call = self.call
            sizes = None if call.rewritten or call.op is not None else body_sizes(call.ingress, call.body)
            if sizes is None:
                sizes = ir_sizes(call.ir)
            view = self._shape_of(sizes, pool)
        return view

    def _shape_of(self, sizes: Any, pool: str) -> dict[str, Any]:
        call = self.call
        view = self._shape[pool] = shape_view(sizes, request_id=self.request_id, pool=pool,
                                              ingress=call.ingress.name, stream=call.stream,
                                              operation=call.op.name if call.op is not None else None)
        return view

    def _read_body(self, pool: str) -> dict[str, Any] | None:
        """Neither view is built yet and the prompt is wanted: read the shape and the prompt view
        from the client's body in one pass (``body_view``) when it covers the body; the shape view
        (cached), or ``None`` when the body needs the IR."""
        call = self.call
        if call.rewritten or call.op is not None:
            return None
        both = body_view(call.ingress, call.body)
        if both is None:
            return None
        sizes, self._prompt = both
        return self._shape_of(sizes, pool)

    def rewritten(self) -> None:
        """The body changed: rebuild every projection from the new IR on next use."""
        self._shape.clear()
        self._prompt = None

    def message(self, op: str, pool: str, candidates: list[dict[str, Any]], *, prompt: str, user: str,
                stage: dict[str, Any] | None = None, owned: bool = False,
                headers: tuple[str, ...] = ()) -> dict[str, Any]:
        """One message for one hook, per its effective grant, every part of it new (a plugin that
        mutates its payload changes nothing another hook sees). ``owned``: the message goes to one
        hook alone: ``candidates`` (built for it) and the cached prompt view are handed over as they
        are instead of copied (a later message rebuilds the prompt view). ``headers``: the hook's
        header allowlist (lower-cased names; ``request.headers`` is set when it is not empty)."""
        shape = self._shape.get(pool)
        if shape is None and prompt != "no" and self._prompt is None:
            shape = self._read_body(pool)
        req = dict(shape if shape is not None else self.shape(pool))    # the cached shape is shared by later messages
        if prompt != "no":
            view = self._prompt
            if view is None:
                view = self._prompt_view()
            system, messages = view
            if system is not None:
                req["system"] = system
            if owned:
                self._prompt = None
                req["messages"] = messages
            else:
                self._prompt = view
                req["messages"] = [dict(m) for m in messages]
        if user != "no" and op == "decide":
            if self._user is None:
                self._user = user_view(getattr(self.call, "identity", None), self.call.ir.user)
            req["user"] = dict(self._user)
        if headers:
            sent = self.call.headers
            req["headers"] = {n: sent[n] for n in headers if n in sent}
        msg: dict[str, Any] = {"op": op, "request": req,
                               "candidates": candidates if owned else copy_candidates(candidates), "context": {}}
        if stage is not None:
            msg["stage"] = dict(stage)
        return msg

    def _prompt_view(self) -> Prompt:
        """The prompt view of the request: from the client's body when ``busbar.hooks.bodyshape``
        reads its shape (no IR built), else from the IR; a rewritten request always uses the IR."""
        call = self.call
        view = None if call.rewritten or call.op is not None else body_prompt(call.ingress, call.body)
        return view if view is not None else prompt_view(call.ir)

    # ------------------------------------------------------------------ taps

    def tap(self, taps: Sequence[TapSpec], at: str, **fields: Any) -> None:
        """Offer a ``notify`` at stage ``at`` to every tap of ``taps`` observing it. Never blocks and
        never raises into the request path."""
        if not taps:
            return
        stage = stage_view(at, **fields)
        for t in taps:
            if t.at != at:
                continue
            try:
                prompt = t.prompt if at == "request" else "no"
                t.facade.notify(self.message("notify", self.pool, [], prompt=prompt, user="no", stage=stage,
                                             headers=t.facade.headers))
            except Exception:  # a projection fault must never fail the request it observes
                log.exception("tap '%s': could not build the %s observation", t.name, at)

    def attempt(self, model: str, remaining: int, previous_failure: str | None) -> None:
        """Stage ``attempt``: one dispatch (``attempt_number`` counts from 1). The walk calls it only
        when :attr:`taps` is non-empty (nothing else reads the count, and ``taps`` never changes)."""
        self.attempts += 1
        if self.taps:
            self.tap(self.taps, "attempt", model=model, attempt_number=self.attempts,
                     remaining_candidates=remaining,
                     previous_failure=previous_failure if self.attempts >= 2 else None)

    def finish(self, reply: Reply) -> None:
        """The request's reply is known: fire ``completion`` now, or at the end of its stream."""
        if not self.taps:                       # nothing observes completion: just break call <-> run
            self.completed = True
            self.call = None  # type: ignore[assignment]  # completed: nothing reads it again
            return
        if reply.stream is not None and not self.rejected:
            return                              # stream_done() fires it
        outcome = "rejected_by_gate" if self.rejected else ("ok" if reply.status < 400 else "failed")
        self._complete(outcome, reply.status)

    def stream_done(self, outcome: bool | None) -> None:
        """A committed stream ended: clean (``True``), failed mid-stream, or the client left."""
        self._complete("ok" if outcome is True else "failed", 200)

    def _complete(self, outcome: str, status: int) -> None:
        if self.completed:
            return
        self.completed = True
        if self.taps:
            self.tap(self.taps, "completion", outcome=outcome, status=status)
        self.call = None  # type: ignore[assignment]  # the last stage: break call <-> run, refcounting frees both
