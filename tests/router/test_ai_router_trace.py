"""Every AI router decision reaches the request's trace: an OTLP ``hook busbar-ai-router`` child span
whose verdict names who served, the confidence, the probabilities and the fallback hops.

Source: docs/router.md#busbar-ai-router-hook, docs/operations.md#traces-otlp.
"""
from __future__ import annotations

import os
import signal

import httpx

from tests.e2e.test_hooks_e2e import HEAD
from tests.support.otlp import Receiver, attrs

POOL = """
pools:
  traced:
    hooks:
      - module: busbar-ai-router
        prompt: ro
        timeout_ms: 3000
        settings:
          timeout: 2000
          when: 'req.message_count < 3'
          candidates:
            - { name: oa-a, description: "Mathematics: equations, derivatives, integrals, proofs." }
            - { name: oa-b, description: "Casual conversation and small talk: greetings, jokes." }
          fallback: [ { rules: [], default: [oa-b] } ]
    members: [ { model: oa-a }, { model: oa-b } ]
observability: { otlp_url: "http://127.0.0.1:OTLP/v1/traces" }
"""


def test_decisions_become_hook_spans(gateway_factory, mock, router_plugins) -> None:
    receiver = Receiver()
    try:
        _, trust = router_plugins
        gw = gateway_factory(HEAD + trust + POOL.replace("OTLP", str(receiver.port)), mock.url)
        r = httpx.post(gw.url + "/v1/chat/completions", timeout=30, json={
            "model": "traced", "messages": [{"role": "user", "content": "What is the integral of x^2 from 0 to 3?"}]})
        assert r.headers["x-busbar-route-target"] == "oa-a"
        turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                 {"role": "user", "content": "integral of x^2?"}]
        r = httpx.post(gw.url + "/v1/chat/completions", timeout=30, json={"model": "traced", "messages": turns})
        assert r.headers["x-busbar-route-target"] == "oa-b"          # when is false: the fallback serves
        os.kill(gw.proc.pid, signal.SIGTERM)
        assert gw.proc.wait(15) == 0
        spans = receiver.spans()
        hooks = sorted((s for s in spans if s.name == "hook busbar-ai-router"), key=lambda s: s.start_time_unix_nano)
        assert len(hooks) == 2
        roots = {s.span_id: s for s in spans if s.name == "chat traced"}
        assert all(h.parent_span_id in roots for h in hooks)
        model, fallback = (attrs(h)["busbar.hook.verdict"] for h in hooks)
        assert model.startswith("decided; order; served_by=model; confidence=") and "probabilities={'oa-a': " in model
        assert fallback == ("decided; order; served_by=fallback[0]; hops=[{'from': 'ai', 'to': 'fallback[0]', 'reason': "
                            "'when_false'}]; skipped=when_false")
    finally:
        receiver.server.shutdown()
