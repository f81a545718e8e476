"""busbar-ai-router-hook: a gate that asks a model which pool members should serve a request.

docs/router.md#busbar-ai-router-hook. ``engine: decision`` (the default): a local embedding model
scores the request's *state* against each candidate's description and examples and turns the
scores into probabilities with a temperature (:mod:`._decision`); no network. ``engine:
generative``: a chat model, called through this gateway's own data plane (a member model of
``settings.pool``, then ``fallback_models``), answers ``{destinations, confidence, reason}``
(:mod:`._generative`); every move to the next model is counted in
``ai_model_fallback_total{pool,from,to,reason}``. Per ``decide``:

1. ``when`` (CEL over ``req``) false, the ``prompt: ro`` grant missing, or ``BUSBAR_ROUTER_NO_MODEL``
   set (``busbar route --dry-run --no-model``): the model step is skipped (counted in
   ``router_skipped_total``) and the fallback chain serves.
2. The state (:mod:`._state`: redacted, cut to ``state.max_bytes``) is looked up in the decision
   cache (key: a hash of the state, or ``cache.key``, a CEL expression over ``req``): this process's
   LRU, then the gateway's shared store when the instance has one (:mod:`._guards`; explain
   ``cache: local|store``); a miss spends the budget (fleet-wide with a shared store; over budget:
   the fallback chain serves, reason ``budget``) and runs the model; a model
   step longer than ``timeout`` ms is discarded (reason ``timeout``), an exception too (``error``).
   The generative engine checks the budget before each call and spends the reply's
   ``usage.total_tokens``; its whole chain (retries, backoffs, fallback models) runs within
   ``timeout``; a chain that ends without an answer hands over with the last reason (``timeout``,
   ``budget``, ``error``, ``bad_output``, ``denied``, ``unknown_model``). A 401/403 or 404 from the
   gateway is not retried on that model (the next model at once); a 401/403 logs a warning naming
   ``settings.gateway_key`` at most once a minute per instance.
3. ``multi: false``: the top candidate wins when its probability is at least ``min_confidence`` and
   leads the runner-up by at least ``min_margin``: ``order`` (every candidate by probability, top
   first). ``multi: true``: ``restrict`` to every candidate at or over ``min_confidence``.
   The generative engine: its self-reported ``confidence`` against ``min_confidence``; ``multi:
   false`` orders its first destination (the others it named are dropped), ``multi: true``
   restricts to every destination it named (no ``min_margin``: one confidence). An empty answer is
   low confidence. Otherwise low confidence: ``on_low_confidence`` (ordered first), or with
   ``fallback_on_low_confidence: true`` (or neither set) the fallback chain, reason ``low_confidence``.
4. The fallback chain: each ``fallback[i]`` rules configuration in order (``match: first`` orders,
   ``all`` restricts; one that chooses nothing hands over with reason ``no_choice``), ending in the
   pool's SWRR (the gate abstains). Every hop is counted in ``router_fallback_total{pool,from,to,reason}``.

The plugin is a :class:`busbar_sdk.DictHookPlugin` (the wire dicts as they are, no model parsed),
not inline (the decision engine embeds text; the generative engine waits on the network): it runs
on the instance's worker threads.

The reply carries an ``explain`` object next to its arm (ignored by the request path; shown by
``busbar route --dry-run`` and scored by ``busbar hooks test``/``calibrate``): engine, model, scores,
probabilities, temperature, confidence, verdict, served_by, hops, cached (and ``cache``: ``local`` or
``store`` when it was). Each decision is also
logged (logger ``busbar.router``, DEBUG). ``status`` reports the counters and the decision latency.

Source: docs/router.md#busbar-ai-router-hook, docs/hooks.md#what-a-gate-may-answer.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from importlib import resources
from typing import Any, ClassVar

import httpx
from busbar_sdk import DictHookPlugin, export_plugin
from busbar_sdk.rules import activation, holds, reply_for, req_object

from busbar_ai_router_hook._decision import MODEL_ID, DecisionEngine
from busbar_ai_router_hook._generative import Answer, GenerativeEngine, StepFailed, decode_hit, encode_hit
from busbar_ai_router_hook._guards import Budget, Cache, Shared
from busbar_ai_router_hook._settings import Settings, SettingsError, parse
from busbar_ai_router_hook._state import build_state, state_text

__all__ = ["SETTINGS_SCHEMA", "AiRouter", "plugin"]
__version__ = "1.5.0"

log = logging.getLogger("busbar.router")

SETTINGS_SCHEMA: dict[str, Any] = json.loads(
    resources.files("busbar_ai_router_hook").joinpath("settings_schema.json").read_text("utf-8"))
NO_MODEL_ENV = "BUSBAR_ROUTER_NO_MODEL"
#: Seconds between two warnings that the gateway refused the router's key (per instance).
DENIED_WARN_EVERY_S = 60.0


class _Compiled:
    """Settings plus what is built from them (engine prototypes, cache, budget); ``raw``: the
    settings as configured (their digest scopes the shared cache)."""

    def __init__(self, settings: Settings, raw: dict[str, Any], client: Callable[[], httpx.Client], shared: Shared):
        self.s = settings
        self.engine: DecisionEngine | None = None
        self.gen: GenerativeEngine | None = None
        if settings.generative is not None:
            self.gen = GenerativeEngine(settings.generative, settings.candidates, settings.instructions,
                                        settings.multi, client())
            self.model = settings.generative.models[0]
        else:
            self.engine = DecisionEngine([(c.name, c.description, c.examples) for c in settings.candidates])
            self.model = MODEL_ID
        scope = hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]
        self.cache = Cache(settings.cache_size, settings.cache_ttl_s, shared, scope, encode_hit, decode_hit)
        self.budget = Budget(settings.max_calls_per_minute, settings.max_tokens_per_hour, shared)


class AiRouter(DictHookPlugin):
    """One configured instance (see the module docstring)."""

    settings_schema: ClassVar[dict[str, Any] | None] = SETTINGS_SCHEMA

    def __init__(self, settings: dict[str, Any]):
        self._client: httpx.Client | None = None
        self.lock = threading.Lock()
        self.shared = Shared()
        try:
            self.c = _Compiled(parse(settings), settings, self.client, self.shared)
        except SettingsError as e:
            raise ValueError(f"busbar-ai-router-hook: {e}") from None
        super().__init__(settings)
        self.settings_version = 0
        self.fallbacks: Counter[tuple[str, str, str, str]] = Counter()
        self.model_fallbacks: Counter[tuple[str, str, str, str]] = Counter()
        self.skipped: Counter[tuple[str, str]] = Counter()
        self.served: Counter[str] = Counter()
        self.cache_hits: Counter[tuple[str, str]] = Counter()
        self.latency_us: deque[float] = deque(maxlen=1024)
        self.denied_warned_at = -DENIED_WARN_EVERY_S

    def client(self) -> httpx.Client:
        """The generative engine's HTTP client: made on first use and kept for the instance's lifetime,
        so a reconfigure never closes a client a decision in flight still uses (no redirects, no
        proxy environment)."""
        with self.lock:
            if self._client is None:
                self._client = httpx.Client(trust_env=False, follow_redirects=False)
            return self._client

    def bind_state(self, state: Any) -> None:
        """The gateway's shared store (``busbar_bind_state``): the cache and budget go fleet-wide."""
        self.shared.state = state

    # ------------------------------------------------------------------ decide

    def decide(self, payload: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        c = self.c
        s = c.s
        request = payload.get("request") or {}
        cands = payload.get("candidates") or []
        pool = str(request.get("pool", ""))
        explain: dict[str, Any] = {"engine": s.engine, "model": c.model}
        req = req_object(request, cands, s.req_fields)
        act = activation(req)
        reason: str | None = None
        reply: dict[str, Any] = {}
        if os.environ.get(NO_MODEL_ENV):
            reason = "no_model"
        elif s.when is not None and not holds(s.when, act):
            reason = "when_false"
        elif "messages" not in request:
            reason = "no_prompt"
        if reason is not None:
            with self.lock:
                self.skipped[(pool, reason)] += 1
            explain["skipped"] = reason
        else:
            reason, reply = self._model_step(pool, request, act, explain, cands)
        if reason is None:
            served = explain["served_by"]
        else:
            reply, served = self._fallback(pool, reason, act, cands, explain)
        elapsed = (time.perf_counter() - t0) * 1e6
        with self.lock:
            self.served[served] += 1
            self.latency_us.append(elapsed)
        explain["served_by"] = served
        log.debug("ai router decision: pool=%s served_by=%s confidence=%s probabilities=%s hops=%s", pool, served,
                 explain.get("confidence"), explain.get("probabilities"), explain.get("hops", []))
        return {**reply, "explain": explain}

    def _model_step(self, pool: str, request: dict[str, Any], act: Any, explain: dict[str, Any],
                    cands: list[dict[str, Any]]) -> tuple[str | None, dict[str, Any]]:
        """Run (or reuse) the model; ``(None, reply)`` when it served, ``(reason, {})`` otherwise."""
        c = self.c
        s = c.s
        try:
            state = build_state(request, s.redact, s.max_bytes, s.headers)
            blob = json.dumps(state, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            if s.cache_key is not None:
                key = str(s.cache_key.eval(act).value())
            else:
                key = hashlib.sha256(blob).hexdigest()
            hit, level = c.cache.get(key)
            if hit is not None:
                explain.update(cached=True, cache=level)
                with self.lock:
                    self.cache_hits[(pool, str(level))] += 1
            elif c.gen is not None:
                deadline = time.monotonic() + s.timeout_ms / 1000
                try:
                    hit = c.gen.ask(blob.decode("utf-8"), deadline, c.budget,
                                    lambda frm, to, why: self._count_model_fallback(pool, frm, to, why),
                                    lambda model, status: self._warn_denied(pool, model, status))
                except StepFailed as e:
                    explain.update(error=e.detail or e.reason, calls=e.calls)
                    return e.reason, {}
                c.cache.put(key, hit)
                explain["cached"] = False
            else:
                if not c.budget.admit():
                    return "budget", {}
                started = time.perf_counter()
                current, history = state_text(state)
                assert c.engine is not None
                hit = c.engine.scores(current, history)
                c.budget.spend(max(1, len(blob) // 4))
                if (time.perf_counter() - started) * 1e3 > s.timeout_ms:
                    return "timeout", {}
                c.cache.put(key, hit)
                explain["cached"] = False
        except Exception as e:  # noqa: BLE001 - a broken model step never fails the request
            explain["error"] = f"{type(e).__name__}: {e}"
            return "error", {}
        if isinstance(hit, Answer):
            return self._generative_verdict(hit, explain, cands)
        scores: dict[str, float] = hit
        assert c.engine is not None
        probs = c.engine.probabilities(scores, s.temperature)
        ranked = sorted(probs, key=lambda n: -probs[n])
        top = probs[ranked[0]]
        explain.update(scores={n: round(scores[n], 5) for n in ranked},
                       probabilities={n: round(probs[n], 4) for n in ranked},
                       temperature=s.temperature, confidence=round(top, 4))
        if s.multi:
            chosen = [n for n in ranked if probs[n] >= s.min_confidence]
            explain["verdict"] = (f"{len(chosen)} candidate(s) at or over min_confidence {s.min_confidence:g}"
                                  if chosen else f"no candidate reaches min_confidence {s.min_confidence:g}")
            if chosen:
                explain["served_by"] = "model"
                return None, reply_for(chosen, "restrict", cands)
        else:
            margin = top - (probs[ranked[1]] if len(ranked) > 1 else 0.0)
            ok = top >= s.min_confidence and margin >= s.min_margin
            explain["verdict"] = (f"top {ranked[0]} {top:.3f} {'>=' if top >= s.min_confidence else '<'} "
                                  f"min_confidence {s.min_confidence:g}; margin {margin:.3f} "
                                  f"{'>=' if margin >= s.min_margin else '<'} min_margin {s.min_margin:g}")
            if ok:
                order = reply_for(ranked, "order", cands)
                if order:
                    explain["served_by"] = "model"
                    return None, order
        return self._low_confidence(explain, cands)

    def _generative_verdict(self, a: Answer, explain: dict[str, Any],
                            cands: list[dict[str, Any]]) -> tuple[str | None, dict[str, Any]]:
        """Thresholds over a generative answer (see the module docstring, step 3)."""
        s = self.c.s
        chosen = a.destinations if s.multi else a.destinations[:1]
        explain.update(model=a.model, lane=a.lane, destinations=a.destinations, confidence=round(a.confidence, 4),
                       reason=a.reason)
        if not explain.get("cached"):
            explain.update(calls=a.calls, tokens=a.tokens)
        dropped = a.dropped + ([] if s.multi else a.destinations[1:])
        if dropped:
            explain["dropped"] = dropped
        explain["probabilities"] = {n: round(a.confidence, 4) for n in chosen}
        ok = bool(chosen) and a.confidence >= s.min_confidence
        cmp = ">=" if a.confidence >= s.min_confidence else "<"
        explain["verdict"] = (f"{', '.join(chosen) or 'nothing'} at confidence {a.confidence:.3f} {cmp} "
                              f"min_confidence {s.min_confidence:g}")
        if ok:
            reply = reply_for(chosen, "restrict" if s.multi else "order", cands)
            if reply:
                explain["served_by"] = "model"
                return None, reply
        return self._low_confidence(explain, cands)

    def _low_confidence(self, explain: dict[str, Any],
                        cands: list[dict[str, Any]]) -> tuple[str | None, dict[str, Any]]:
        s = self.c.s
        if s.on_low_confidence:
            order = reply_for(s.on_low_confidence, "order", cands)
            if order:
                explain["served_by"] = "on_low_confidence"
                return None, order
        return "low_confidence", {}

    def _fallback(self, pool: str, reason: str, act: Any, cands: list[dict[str, Any]],
                  explain: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Walk the fallback chain from the AI step; ``(reply, who served)``."""
        hops: list[dict[str, str]] = []
        frm = "ai"
        for i, rules in enumerate(self.c.s.fallback):
            to = f"fallback[{i}]"
            hops.append({"from": frm, "to": to, "reason": reason})
            out = rules.decide(act)
            reply = reply_for(out.names, "order" if rules.match == "first" else "restrict", cands)
            if reply:
                self._count_hops(pool, hops)
                explain["hops"] = hops
                return reply, to
            frm, reason = to, "no_choice"
        hops.append({"from": frm, "to": "swrr", "reason": reason})
        self._count_hops(pool, hops)
        explain["hops"] = hops
        return {}, "swrr"

    def _warn_denied(self, pool: str, model: str, status: int) -> None:
        """Log that the gateway refused the router's own call (401/403), at most once per
        :data:`DENIED_WARN_EVERY_S` per instance; names the setting, never the key."""
        now = time.monotonic()
        gen_pool = self.c.s.generative.pool if self.c.s.generative is not None else ""
        with self.lock:
            if now < self.denied_warned_at + DENIED_WARN_EVERY_S:
                return
            self.denied_warned_at = now
        log.warning("busbar-ai-router-hook on pool %s: the gateway answered HTTP %d to the router's call to model "
                    "%s: check settings.gateway_key (a valid Busbar key allowed the pool %s); the next model or "
                    "the fallback chain serves meanwhile", pool, status, model, gen_pool)

    def _count_model_fallback(self, pool: str, frm: str, to: str, reason: str) -> None:
        with self.lock:
            self.model_fallbacks[(pool, frm, to, reason)] += 1

    def _count_hops(self, pool: str, hops: list[dict[str, str]]) -> None:
        with self.lock:
            for h in hops:
                self.fallbacks[(pool, h["from"], h["to"], h["reason"])] += 1

    # ------------------------------------------------------------------ management

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        version = body.get("settings_version")
        settings = body.get("settings", {})
        try:
            new = _Compiled(parse(settings), settings, self.client, self.shared)
        except SettingsError as e:
            return {"error": f"busbar-ai-router-hook: {e}"}
        self.c, self.settings, self.settings_version = new, dict(settings), int(version or 0)
        return {"ack": {"settings_version": version}}

    def status(self) -> dict[str, Any]:
        with self.lock:
            metrics: list[dict[str, Any]] = [
                {"name": "router_fallback_total", "type": "counter", "value": n,
                 "labels": {"pool": p, "from": f, "to": t, "reason": r}, "help": "fallback hops"}
                for (p, f, t, r), n in sorted(self.fallbacks.items())][:32]
            metrics += [{"name": "ai_model_fallback_total", "type": "counter", "value": n,
                         "labels": {"pool": p, "from": f, "to": t, "reason": r},
                         "help": "moves to the next model of the generative chain"}
                        for (p, f, t, r), n in sorted(self.model_fallbacks.items())][:16]
            metrics += [{"name": "router_skipped_total", "type": "counter", "value": n,
                         "labels": {"pool": p, "reason": r}, "help": "model steps skipped"}
                        for (p, r), n in sorted(self.skipped.items())][:8]
            metrics += [{"name": "router_decisions_total", "type": "counter", "value": n, "labels": {"served_by": k},
                         "help": "decisions by who served"} for k, n in sorted(self.served.items())][:12]
            metrics += [{"name": "router_cache_hits_total", "type": "counter", "value": n,
                         "labels": {"pool": p, "cache": lvl}, "help": "decisions served from the cache (local: "
                         "this process; store: the gateway's shared store)"}
                        for (p, lvl), n in sorted(self.cache_hits.items())][:8]
            metrics += [{"name": "router_store_errors_total", "type": "counter", "value": n, "labels": {"op": op},
                         "help": "shared store faults (this process's cache and budget served)"}
                        for op, n in sorted(self.shared.error_counts().items())][:4]
            samples = sorted(self.latency_us)
            lat: dict[str, Any] = {"name": "router_decision_latency_us", "type": "histogram", "value": len(samples),
                                   "unit": "us", "help": "decision latency (last 1024)"}
            if samples:
                lat["quantiles"] = {k: round(samples[min(len(samples) - 1, int(q * len(samples)))], 1)
                                    for k, q in (("0.5", 0.5), ("0.99", 0.99))}
            metrics.append(lat)
        return {"status": {"settings_version": self.settings_version, "settings": self.settings,
                           "metrics": metrics[:64]}}


#: The ``busbar.plugins`` entry point (``busbar_ai_router_hook:plugin``).
plugin = export_plugin(AiRouter)
