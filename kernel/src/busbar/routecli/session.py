"""A gateway built for the route commands: the real boot, no listener, no upstream call.

``open_session(config, providers) -> Session`` loads the two config files exactly as ``busbar``
does (``--config``/``BUSBAR_CONFIG``, ``--providers``/``BUSBAR_PROVIDERS``), loads and verifies the
plugins, and builds the gateway with its hook chains (``busbar.server.boot.boot``); nothing listens
and nothing is sent upstream. :meth:`Session.decide` runs one request through a pool's gates the
way the data plane does (``PoolChain.plan`` over the pool's healthy members) and returns a
:class:`Decision`: every gate's reply (``HookRun.trace``), what a router explained about itself
(its reply's ``explain`` object), the reconciled plan and the final walk order.

Raises :class:`SessionError` (one line per fault) for a config that does not boot, an unknown
pool or protocol, and a request body the protocol cannot read.

Source: docs/router.md#busbar-route---dry-run.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from busbar.faults import FaultList

if TYPE_CHECKING:
    from busbar.proxy.gateway import Gateway

__all__ = ["Decision", "Session", "SessionError", "open_session", "request_body"]


class SessionError(FaultList):
    """The command cannot run; ``faults``: one line each."""


@dataclass
class Decision:
    """One request's routing decision, as the data plane would take it.

    Attributes:
        pool: the pool name.
        gates: every gate's reply in firing order (``busbar.hooks.shadow.trace_entry`` dicts, with
            ``explain`` added when the gate explained itself).
        reject: ``{"status", "message"}`` when the request would be refused, else ``None``.
        policy: who decided the order (a gate's module, a strategy) or ``None`` (SWRR).
        order: the ranked members (model names) the walk tries first.
        excluded: members a restriction ruled out (model names).
        walk: the final walk: ``order``, then the other allowed healthy members (SWRR order is
            decided per request; they are listed in pool order).
        latency_us: wall time of the decision (µs).
    """

    pool: str
    gates: list[dict[str, Any]] = field(default_factory=list)
    reject: dict[str, Any] | None = None
    policy: str | None = None
    order: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    walk: list[str] = field(default_factory=list)
    latency_us: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"pool": self.pool, "gates": self.gates, "reject": self.reject, "policy": self.policy,
                "order": self.order, "excluded": self.excluded, "walk": self.walk,
                "latency_us": round(self.latency_us, 1)}

    @property
    def model_calls(self) -> int:
        """Calls a generative router made through the gateway for this decision (its explain ``calls``)."""
        return sum(int(g["explain"].get("calls", 0)) for g in self.gates
                   if isinstance(g.get("explain"), dict) and type(g["explain"].get("calls", 0)) is int)

    @property
    def explain(self) -> dict[str, Any] | None:
        """The first gate explanation (a router's probabilities, thresholds, fallback hops)."""
        return next((g["explain"] for g in self.gates if "explain" in g), None)


def request_body(data: Any, protocol: str, pool: str) -> dict[str, Any]:
    """A request body from ``data``: a body as is (``model`` set to ``pool`` when absent), or a
    prompt string turned into one user message in ``protocol``'s shape."""
    if isinstance(data, str):
        if protocol == "anthropic":
            return {"model": pool, "max_tokens": 1024, "messages": [{"role": "user", "content": data}]}
        if protocol == "gemini":
            return {"contents": [{"role": "user", "parts": [{"text": data}]}]}
        if protocol == "cohere":
            return {"model": pool, "messages": [{"role": "user", "content": data}]}
        if protocol == "responses":
            return {"model": pool, "input": data}
        return {"model": pool, "messages": [{"role": "user", "content": data}]}
    if not isinstance(data, dict):
        raise SessionError([f"--data: a request body (a JSON object) or a prompt (a string), found "
                            f"{type(data).__name__}"])
    body = dict(data)
    body.setdefault("model", pool)
    return body


class Session:
    """A booted gateway (see the module docstring)."""

    def __init__(self, gw: Gateway):
        self.gw = gw

    def pool_names(self) -> list[str]:
        return list(self.gw.pools)

    def facades(self) -> list[Any]:
        engine = self.gw.hooks
        return list(engine.facades) if engine is not None else []

    async def decide(self, pool: str, body: dict[str, Any], protocol: str = "openai",
                     headers: dict[str, str] | None = None) -> Decision:
        """Route ``body`` (a client body in ``protocol``) through ``pool``'s gates; raises
        :class:`SessionError` for an unknown pool/protocol or an unreadable body."""
        from busbar.hooks.run import HookRun
        from busbar.proto.errors import ProtoError
        from busbar.proto.registry import DIALECTS
        from busbar.proxy.translate import Call

        gw = self.gw
        p = gw.pools.get(pool)
        if p is None:
            raise SessionError([f"--pool: '{pool}' is not a configured pool (pools: {', '.join(gw.pools) or 'none'})"])
        dialect = DIALECTS.get(protocol)
        if dialect is None:
            raise SessionError([f"--protocol: '{protocol}' is not a protocol ({', '.join(sorted(DIALECTS))})"])
        try:
            normal = dialect.normalize_request(body)
            call = Call(dialect, normal, orjson.dumps(normal), normal.get("stream") is True,
                        {k.lower(): v for k, v in (headers or {}).items()}, pool)
            call.ir  # noqa: B018 - parse now: an unreadable body is the caller's error, as on the data plane
        except ProtoError as e:
            raise SessionError([f"--data: {e.message}"]) from None
        except Exception as e:  # noqa: BLE001 - the reader only consumes the body: a shape it did not expect
            raise SessionError([f"--data: malformed {protocol} request body ({type(e).__name__}: {e})"]) from None
        engine = gw.hooks
        chain = engine.chains.get(pool) if engine is not None else None
        out = Decision(pool)
        models = {m.index: m.lane.name for m in p.members}
        now = gw.clock()
        usable = [m for m in p.members if m.index not in p.excluded_idx and m.usable(now)]
        if chain is None:
            out.walk = [m.lane.name for m in usable]
            return out
        run = HookRun(call)
        run.pool = pool
        run.taps = chain.run_taps
        run.trace = []
        call.hooks = run
        for f in self.facades():
            f.explained = {}
        t0 = time.perf_counter()
        plan = await chain.plan(gw, call, p)
        out.latency_us = (time.perf_counter() - t0) * 1e6
        for entry in run.trace:
            for f in self.facades():
                if f.name == entry["gate"] and f.explained and run.request_id in f.explained:
                    entry["explain"] = f.explained[run.request_id]
            out.gates.append(entry)
        if plan.reply is not None:
            try:
                msg = orjson.loads(plan.reply.body)
            except (orjson.JSONDecodeError, TypeError):
                msg = None
            out.reject = {"status": plan.reply.status, "message": _error_text(msg)}
            out.policy = plan.reply.headers.get("x-busbar-route-policy")
            return out
        out.policy = plan.policy
        out.order = [models[i] for i in plan.order or ()]
        out.excluded = [models[i] for i in sorted(plan.excluded)]
        rest = [m.lane.name for m in usable if m.index not in plan.excluded and m.lane.name not in out.order]
        out.walk = [n for n in out.order if n in {m.lane.name for m in usable}] + rest
        return out

    def close(self) -> None:
        engine = self.gw.hooks
        if engine is not None:
            engine.close()


def _error_text(body: Any) -> str:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return ""


def open_session(config: str | None, providers: str | None) -> Session:
    """Boot the gateway of ``config``/``providers`` (defaults as ``busbar``); raises
    :class:`SessionError` with the boot's own fault lines."""
    from busbar.config.errors import ConfigError
    from busbar.config.load import load_config, resolve_paths
    from busbar.server.boot import BootError, boot

    cfg_path, prov_path = resolve_paths(config, providers)
    try:
        loaded = load_config(cfg_path, prov_path, check_support=True)
    except ConfigError as e:
        raise SessionError(list(e.faults)) from None
    try:
        gw, _ = boot(loaded, os.environ)
    except BootError as e:
        raise SessionError(list(e.faults)) from None
    return Session(gw)
