"""Fixtures for the hook-engine unit tests: a real Gateway over an httpx.MockTransport upstream,
with hook plugins simulated in-process (``FakePlugins``: the loader's ``get``/``grant``/``open``
surface, each instance's ``call`` a Python function of ``(payload, settings)``).

``HookBed(config_yaml, hooks={module: fn}, needs={module: (prompt, user)})`` builds the gateway;
``await bed.send(pool, text=..., ingress="openai"|"anthropic", stream=False)`` serves one request
through ``busbar.proxy.engine.forward`` (the real request path after body parsing); ``bed.seen``
records every payload each hook received and ``bed.upstream`` every upstream request
``(model, body)``. Upstream answers: model names starting ``fail`` answer 503, ``slow`` sleep
``bed.slow_s`` first; everything else answers 200 in the member's dialect.
"""
from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from busbar.config.load import load_config_text
from busbar.loader.registry import Grant, effective_grant
from busbar.proto.registry import get_dialect
from busbar.proxy.engine import forward
from busbar.proxy.gateway import Gateway
from busbar.proxy.translate import Call

HookFn = Callable[[dict[str, Any], dict[str, Any]], Any]

HEAD = """
listen: "127.0.0.1:0"
plugins: { enabled: true, dir: plugins }
metrics: { buffer_seconds: 60 }
providers:
  oa: { protocol: openai, base_url: "http://127.0.0.1:9", api_key: { env: K } }
  an: { protocol: anthropic, base_url: "http://127.0.0.1:9", api_key: { env: K } }
models:
  big: { provider: oa, max_concurrent: 10 }
  mid: { provider: oa }
  small: { provider: oa, max_concurrent: 4 }
  fail-a: { provider: oa }
  fail-b: { provider: oa }
  claude: { provider: an, default_max_tokens: 1024 }
rate_card:
  big: { input_utok: 15.0, output_utok: 75.0 }
  mid: { input_utok: 3.0, output_utok: 15.0 }
  small: { input_utok: 0.15, output_utok: 0.6 }
  fail-a: { input_utok: 1.0, output_utok: 1.0 }
  fail-b: { input_utok: 2.0, output_utok: 2.0 }
  claude: { input_utok: 3.0, output_utok: 15.0 }
"""


class FakeInstance:
    def __init__(self, plugin: FakePlugin, settings: dict[str, Any], grant: Grant):
        self.plugin, self.settings, self.grant = plugin, dict(settings), grant
        self.closed = False

    def call(self, payload: dict[str, Any]) -> Any:
        if "op" not in payload:                  # management: the plugin's mgmt fn, else a polite ack
            self.plugin.mgmt_seen.append(copy.deepcopy(payload))
            if self.plugin.mgmt is not None:
                return self.plugin.mgmt(payload, self.settings)
            if "configure" in payload:
                return {"ack": {"settings_version": payload["configure"]["settings_version"]}}
            return {}
        self.plugin.seen.append(copy.deepcopy(payload))
        return self.plugin.fn(payload, self.settings)

    def close(self) -> None:
        self.closed = True


class _Needs:
    def __init__(self, prompt: str, user: str):
        self.prompt, self.user = prompt, user


class _Manifest:
    def __init__(self, prompt: str, user: str, settings_schema: str | None = None):
        self.needs = _Needs(prompt, user)
        self.settings_schema = settings_schema


class FakePlugin:
    kind = "hook"

    def __init__(self, name: str, fn: HookFn, needs: tuple[str, str] = ("rw", "ro"), kind: str = "hook",
                 settings_schema: str | None = None):
        self.name, self.fn, self.kind = name, fn, kind
        self.manifest = _Manifest(*needs, settings_schema)
        self.seen: list[dict[str, Any]] = []
        self.mgmt_seen: list[dict[str, Any]] = []
        self.mgmt: HookFn | None = None
        self.instances: list[FakeInstance] = []

    def grant(self, prompt: str = "no", user: str = "no") -> Grant:
        return effective_grant(self.manifest.needs.prompt, self.manifest.needs.user, prompt, user)

    def open(self, settings: dict[str, Any] | None = None, *, prompt: str = "no", user: str = "no") -> FakeInstance:
        inst = FakeInstance(self, settings or {}, self.grant(prompt, user))
        self.instances.append(inst)
        return inst


class FakePlugins:
    def __init__(self, plugins: dict[str, FakePlugin]):
        self.plugins = plugins

    def get(self, name: str) -> FakePlugin | None:
        return self.plugins.get(name)


def _resp(status: int, data: Any = None, *, content: bytes | None = None,
          ctype: str = "application/json") -> httpx.Response:
    """A streamable response (the engine reads upstream bodies with ``aiter_raw``)."""
    raw = content if content is not None else orjson.dumps(data)
    return httpx.Response(status, stream=httpx.ByteStream(raw), headers={"content-type": ctype})


def _answer(req: httpx.Request) -> httpx.Response:
    body = orjson.loads(req.content)
    model = body.get("model", "")
    if req.url.path.endswith("/messages"):
        if body.get("stream"):
            events = [
                ("message_start", {"type": "message_start", "message": {
                    "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 0}}}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": "ok"}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                   "usage": {"output_tokens": 1}}),
                ("message_stop", {"type": "message_stop"}),
            ]
            data = b"".join(f"event: {e}\ndata: ".encode() + orjson.dumps(d) + b"\n\n" for e, d in events)
            return _resp(200, content=data, ctype="text/event-stream")
        return _resp(200, {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                                         "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                                         "usage": {"input_tokens": 3, "output_tokens": 1}})
    if body.get("stream"):
        chunks = [{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model,
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]},
                  {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model,
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        data = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        return _resp(200, content=data, ctype="text/event-stream")
    return _resp(200, {"id": "c1", "object": "chat.completion", "created": 1, "model": model,
                                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                                  "finish_reason": "stop"}],
                                     "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})


class HookBed:
    """A gateway with simulated hook plugins and a recording upstream (see the module docstring)."""

    def __init__(self, config: str, hooks: dict[str, HookFn] | None = None,
                 needs: dict[str, tuple[str, str]] | None = None, kinds: dict[str, str] | None = None,
                 plugins: bool = True, schemas: dict[str, str] | None = None):
        self.upstream: list[tuple[str, dict[str, Any]]] = []
        self.slow_s = 0.0
        needs = needs or {}
        kinds = kinds or {}
        schemas = schemas or {}
        self.plugins = {name: FakePlugin(name, fn, needs.get(name, ("rw", "ro")), kinds.get(name, "hook"),
                                         schemas.get(name))
                        for name, fn in (hooks or {}).items()}
        loaded = load_config_text(HEAD + config, {"K": "x"})
        self.gw = Gateway.build(loaded, {"K": "x"}, transport=httpx.MockTransport(self._handle),
                                plugins=FakePlugins(self.plugins) if plugins else None)

    async def _handle(self, req: httpx.Request) -> httpx.Response:
        body = orjson.loads(req.content)
        model = body.get("model", "")
        self.upstream.append((model, body))
        if model.startswith("fail"):
            return _resp(503, {"error": {"message": "overloaded", "type": "server_error"}})
        if self.slow_s:
            await asyncio.sleep(self.slow_s)
        return _answer(req)

    def seen(self, module: str) -> list[dict[str, Any]]:
        return self.plugins[module].seen

    async def send(self, pool: str, text: str = "hello", *, ingress: str = "openai", stream: bool = False,
                   body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> Any:
        if body is None:
            if ingress == "anthropic":
                body = {"model": pool, "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
            else:
                body = {"model": pool, "messages": [{"role": "user", "content": text}]}
        if stream:
            body = {**body, "stream": True}
        target = self.gw.target(pool)
        call = Call(get_dialect(ingress), body, orjson.dumps(body), stream, headers or {}, pool)
        reply = await forward(self.gw, call, target)
        if reply.stream is not None:
            reply.body = b"".join([chunk async for chunk in reply.stream])
        return reply

    def close(self) -> None:
        if self.gw.hooks is not None:
            self.gw.hooks.close()


@pytest.fixture
def bed_factory():
    made: list[HookBed] = []

    def make(config: str, hooks: dict[str, HookFn] | None = None, **kw: Any) -> HookBed:
        b = HookBed(config, hooks, **kw)
        made.append(b)
        return b
    yield make
    for b in made:
        b.close()


def body_of(reply: Any) -> dict[str, Any]:
    return orjson.loads(reply.body)
