"""Request preparation per lane: passthrough bytes, or the IR adapted to the lane and re-written.

``Call`` is one client request as the walk sees it (its IR built lazily: a same-protocol hop never
pays for it). ``build_body(call, lane, member_reasoning, limits) -> (bytes, dropped)``:

- Same protocol: the client's bytes, unchanged when the client named the lane's wire model (or the
  protocol carries the model in the URL), else with ``model`` rewritten. An OpenAI stream that does
  not ask ``stream_options.include_usage`` gets it asked (so limits can charge it) and
  ``call.strip_usage`` set: the relay strips the added usage (``busbar.proto.openai.usage_ask``). After a hook's rewrite
  (``Call.install_ir``) the IR is serialized by the same dialect instead (its ``extra`` kept).
- Cross protocol, on a per-attempt copy of the IR (the shared IR is never mutated):
  ``max_tokens`` injected when the target requires it (lane ``default_max_tokens``, else
  ``limits.default_max_tokens``; never a small constant — case C017); the reasoning ask dropped
  (and reported) when the member/model is not declared ``reasoning: true``, else converted through
  ``limits.reasoning_effort_budgets`` (words <-> token budgets); ``extra`` (source-only fields) is
  cleared — the leak guard — and every dropped field name is returned so the reply can carry
  ``x-busbar-translation-dropped``.

Source: docs/config-at-a-glance.md#models (default_max_tokens, reasoning).
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from busbar.ir.model import IrRequest, ReasoningAsk
from busbar.proto.openai.usage_ask import asked_usage, asking_usage

if TYPE_CHECKING:
    from busbar.config.schema import LimitsConfig
    from busbar.config.schema_ops import ReasoningBudgets
    from busbar.hooks.run import HookRun
    from busbar.proto.base import Dialect
    from busbar.proxy.operation import Operation
    from busbar.proxy.record import RequestRecord
    from busbar.proxy.runtime import Lane

log = logging.getLogger("busbar.translate")

MODEL_IN_URL = frozenset({"gemini", "bedrock", "bedrock-invoke"})
SHIM_PREFIX = "__busbar_"


class Call:
    """One client request. ``called``: the pool/model name the client used; ``reencode``: the client
    needs its stream re-framed even on a same-protocol hop (Gemini JSON-array framing)."""

    __slots__ = ("ingress", "body", "raw", "stream", "headers", "called", "_ir", "client_model",
                 "shims", "reencode", "hooks", "rewritten", "strict", "record", "op", "strip_usage")

    def __init__(self, ingress: Dialect, body: dict[str, Any], raw: bytes, stream: bool, headers: Mapping[str, str],
                 called: str, shims: dict[str, bool] | None = None):
        self.ingress = ingress
        self.body = body
        self.raw = raw
        self.stream = stream
        self.headers = headers
        self.called = called
        self.client_model = body.get("model")
        self._ir: IrRequest | None = None
        self.shims = shims or {}
        self.reencode = bool(self.shims)
        self.hooks: HookRun | None = None   # while hooks observe this request
        self.rewritten = False       # a hook replaced the body: every hop re-serializes the IR
        self.strict = False          # the pool refuses lossy translation (translation: strict)
        self.record: RequestRecord | None = None   # the data plane's bookkeeping (busbar.proxy.record)
        self.op: Operation | None = None    # a non-chat operation (busbar.proxy.operation); None = chat
        self.strip_usage = False     # usage was asked for the gateway, not the client: strip it from the relay

    @property
    def ir(self) -> IrRequest:
        """The client's request as IR (raises ``BadRequest`` for a malformed body)."""
        if self._ir is None and self.op is not None:    # hooks see a non-chat request's inputs
            self._ir = self.op.ir_view()
        if self._ir is None:
            ir = self.ingress.read_request(self.body)
            ir.stream = self.stream
            if ir.model is None:
                ir.model = self.called
            if self.shims:
                ir.extra.update(self.shims)
            self._ir = ir
        return self._ir

    def reset_ir(self) -> None:
        """The client's body was replaced (``body``/``raw``): parse it again on next use, unless a
        hook's rewrite (which every hop serializes) is installed."""
        if not self.rewritten:
            self._ir = None

    def install_ir(self, ir: IrRequest) -> None:
        """Replace the request body with ``ir`` (a hook's rewrite): from now on every hop, same
        protocol included, serializes this IR instead of forwarding the client's bytes."""
        self._ir = ir
        self.rewritten = True


def build_body(call: Call, lane: Lane, member_reasoning: bool, limits: LimitsConfig) -> tuple[bytes, list[str]]:
    """The upstream body for ``lane`` and the request fields dropped on the way."""
    if call.op is not None:         # embeddings & co. have their own codecs (busbar.proxy.operation)
        return call.op.body(call, lane)
    egress = lane.provider.dialect
    if egress is call.ingress:
        ask = call.stream and egress.name == "openai"     # every OpenAI stream is charged its usage
        if call.rewritten:          # same dialect, rewritten body: the client's fields, new messages
            call.strip_usage = ask and not call.ir.include_usage    # the writer always asks usage
            return orjson.dumps(egress.write_request(copy.copy(call.ir), lane.upstream_model)), []
        call.strip_usage = ask = ask and not asked_usage(call.body)
        if not ask and (call.client_model == lane.upstream_model or egress.name in MODEL_IN_URL):
            return call.raw, []
        body = asking_usage(call.body) if ask else dict(call.body)
        body["model"] = lane.upstream_model
        return orjson.dumps(body), []
    ir = copy.copy(call.ir)
    dropped = list(ir.dropped)
    if ir.extra:
        dropped += [k for k in ir.extra if not k.startswith(SHIM_PREFIX)]
        ir.extra = {}
    if egress.requires_max_tokens and ir.max_tokens is None:
        ir.max_tokens = lane.default_max_tokens or limits.default_max_tokens
    if ir.reasoning is not None:
        if member_reasoning:
            ir.reasoning = _convert_reasoning(ir.reasoning, limits.reasoning_effort_budgets)
        else:
            ir.reasoning = None
            dropped.append("reasoning")
            log.warning("reasoning ask dropped for lane %s (not declared reasoning: true)", lane.name)
    ir.dropped = dropped
    if dropped:
        log.info("translation %s -> %s dropped %s", call.ingress.name, egress.name, ", ".join(dropped))
    # prompt_caching: model-gated markers (Bedrock cachePoint) only with the lane's flag
    return orjson.dumps(egress.write_request(ir, lane.upstream_model, prompt_caching=lane.prompt_caching)), dropped


def _convert_reasoning(ask: ReasoningAsk, table: ReasoningBudgets) -> ReasoningAsk:
    """Fill the missing half of an effort/budget ask from the operator's effort table."""
    budgets = {"minimal": table.minimal, "low": table.low, "medium": table.medium, "high": table.high}
    if ask.budget_tokens is None and ask.effort in budgets:
        return ReasoningAsk(ask.effort, budgets[ask.effort], ask.include_thoughts)
    if ask.effort is None and ask.budget_tokens is not None:
        tokens = ask.budget_tokens
        if tokens == -1:                            # Gemini dynamic thinking projects as medium
            return ReasoningAsk("medium", -1, ask.include_thoughts)
        word = min(budgets, key=lambda w: abs(budgets[w] - tokens))
        return ReasoningAsk(word, tokens, ask.include_thoughts)
    return ask
