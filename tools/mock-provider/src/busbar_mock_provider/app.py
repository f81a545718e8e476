"""The raw ASGI application: routing, auth, request log, script lookup, default replies.

Request flow for a provider endpoint: read the body -> log it -> auth check (401 with the provider's
captured body, unless ``require_auth`` is off) -> take a script rule if one fits -> otherwise the
protocol's default reply -> :func:`~.wire.deliver` with the path knobs' delays.

Endpoints: ``POST [prefix]/v1/chat/completions`` (OpenAI), ``POST [prefix]/v1/messages`` (Anthropic),
``GET [prefix]/v1/models`` (OpenAI list, or Anthropic's when ``anthropic-version`` is sent),
``GET /healthz`` (and ``/health``, gwbench's name), the control API under ``/_mock/`` (``control.py``).
Anything else: 404 with OpenAI's "Invalid URL" body, unless a script rule matches the path.

What must not live here: wire shapes (protocol modules) and fault semantics (``faults.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .anthropic import AnthropicMessages
from .audio import AUDIO_UPLOADS, OpenAISpeech, OpenAITranscribe, read_form
from .base import Dialect, ErrorReply, next_seq
from .bedrock import BedrockConverse
from .cohere import CohereChat
from .control import handle_control, send_json
from .embeddings import BedrockInvokeEmbed, CohereEmbed, GeminiEmbed, OpenAIEmbed
from .faults import Script
from .fixtures import FixtureStore, default_fixtures_dir
from .gemini import GeminiGenerate
from .images import GeminiPredict, OpenAIImages
from .journal import Journal
from .openai_chat import OpenAIChat
from .openai_chat import error_body as openai_error_body
from .reply import plan_reply
from .rerank import CohereRerank, OpenAIModeration
from .responses import OpenAIResponses
from .routing import Route, route
from .scripted import scripted_outcome
from .wire import BodyTooLarge, Exchange, Outcome, Receive, Scope, Send, deliver

__all__ = ["MockConfig", "MockProvider", "create_app"]

MODELS = ("gpt-4o-mini", "gpt-4o", "claude-mock-1", "mock")
_HEALTH = b'{"status":"ok"}'


@dataclass(slots=True)
class MockConfig:
    """Process-wide settings (CLI flags).

    Attributes:
        fixtures_dir: the captures directory (``--fixtures`` / ``BUSBAR_MOCK_FIXTURES``).
        require_auth: demand provider credentials (``--no-auth`` turns it off).
        record_max: request/event log cap (0: no request log).
        delay_ms / chunks / chunk_delay_ms: knob defaults when the path gives none.
    """

    fixtures_dir: Path
    require_auth: bool = True
    record_max: int = 10_000
    delay_ms: float = 0.0
    chunks: int | None = None
    chunk_delay_ms: float = 0.0


def _parse_body(raw: bytes) -> Any:
    if not raw:
        return ""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")


class MockProvider:
    """The mock provider as an ASGI 3 callable; holds the script, the journal and the dialects."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.fixtures = FixtureStore(config.fixtures_dir)
        self.script = Script()
        self.journal = Journal(config.record_max)
        self.dialects: dict[str, Dialect] = {
            "/v1/chat/completions": OpenAIChat(self.fixtures),
            "/v1/messages": AnthropicMessages(self.fixtures),
            ":generateContent": GeminiGenerate(self.fixtures),
            ":streamGenerateContent?alt=sse": GeminiGenerate(self.fixtures),
            ":streamGenerateContent": GeminiGenerate(self.fixtures, sse=False),
            "/converse": BedrockConverse(self.fixtures),
            "/converse-stream": BedrockConverse(self.fixtures),
            "/v1/responses": OpenAIResponses(self.fixtures),
            "/v2/chat": CohereChat(self.fixtures),
            "/v1/embeddings": OpenAIEmbed(self.fixtures),
            "/v2/embed": CohereEmbed(self.fixtures),
            ":embedContent": GeminiEmbed(self.fixtures, batch=False),
            ":batchEmbedContents": GeminiEmbed(self.fixtures, batch=True),
            "/invoke": BedrockInvokeEmbed(self.fixtures),
            "/v2/rerank": CohereRerank(self.fixtures),
            "/v1/moderations": OpenAIModeration(self.fixtures),
            "/v1/images/generations": OpenAIImages(self.fixtures),
            ":predict": GeminiPredict(self.fixtures),
            "/v1/audio/transcriptions": OpenAITranscribe(self.fixtures, "transcribe"),
            "/v1/audio/translations": OpenAITranscribe(self.fixtures, "translate"),
            "/v1/audio/speech": OpenAISpeech(self.fixtures),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point (http; lifespan is acknowledged and otherwise ignored)."""
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        ex = Exchange(scope, receive, send)
        path: str = scope["path"]
        if path.startswith("/_mock/"):
            await handle_control(self, ex)
        elif path in ("/healthz", "/health"):
            await ex.start(200, [("content-type", "application/json"), ("content-length", str(len(_HEALTH)))])
            await ex.write(_HEALTH, False)
        else:
            await self._provider(ex, path, route(path, scope.get("query_string", b"").decode("latin-1")))

    def _outcome(self, err: ErrorReply, base: list[tuple[str, str]]) -> Outcome:
        return Outcome(err.status, [("content-type", "application/json"), *err.headers, *base], body=err.body)

    def _default(
        self,
        dialect: Dialect,
        body: Any,
        seq: int,
        rt: Route,
        text: str | None,
        base: list[tuple[str, str]],
        headers: dict[str, str],
    ) -> Outcome:
        if not isinstance(body, dict):
            return self._outcome(dialect.bad_json(), base)
        prompt = dialect.read_prompt(body)
        if isinstance(prompt, ErrorReply):
            return self._outcome(prompt, base)
        refused = dialect.bind_state(body, headers, prompt)
        if refused is not None:
            return self._outcome(refused, base)
        chunks = rt.chunks if rt.chunks is not None else self.config.chunks
        reply = plan_reply(prompt, seq=seq, chunks=chunks, text=text)
        rendered = dialect.render(reply, prompt, seq)
        headers = [("content-type", rendered.content_type), *base]
        if rendered.frames is not None:
            headers.append(("cache-control", "no-cache"))
        return Outcome(200, headers, body=rendered.body or b"", frames=rendered.frames)

    def _invalid_url(self, method: str, path: str) -> Outcome:
        body = openai_error_body(f"Invalid URL ({method} {path})", "invalid_request_error")
        return Outcome(404, [("content-type", "application/json")], body=body)

    async def _models(self, ex: Exchange, headers: dict[str, str]) -> None:
        anthropic = "anthropic-version" in headers
        dialect = self.dialects["/v1/messages" if anthropic else "/v1/chat/completions"]
        if self.config.require_auth and not dialect.authorized(headers):
            await deliver(ex, self._outcome(dialect.auth_error(), []), lambda _phase: None)
            return
        if anthropic:
            data = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in MODELS
            ]
            await send_json(
                ex, 200, {"data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]}
            )
        else:
            listing: list[dict[str, Any]] = [
                {"id": m, "object": "model", "created": 1700000000, "owned_by": "busbar-mock"} for m in MODELS
            ]
            await send_json(ex, 200, {"object": "list", "data": listing})

    async def _provider(self, ex: Exchange, path: str, rt: Route) -> None:
        method: str = ex.scope["method"]
        try:
            raw = await ex.read_body()
        except BodyTooLarge:
            await send_json(
                ex,
                413,
                {
                    "error": {
                        "message": "Request body too large.",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
            )
            return
        headers = ex.headers()
        if rt.endpoint in AUDIO_UPLOADS:     # multipart: the journal records the fields and the file's digest
            form = read_form(raw, headers.get("content-type", ""))
            body = form if isinstance(form, dict) else {"error": form}
        else:
            body = _parse_body(raw)
        raw_path = ex.scope.get("raw_path")
        self.journal.request(method, path, ex.scope.get("query_string", b"").decode("latin-1"), headers, body,
                             raw_path.decode("latin-1") if raw_path is not None else None)
        if rt.model is not None and isinstance(body, dict):  # path-model: model and stream from the URL
            body = {**body, "model": rt.model, "stream": rt.stream}
        if rt.endpoint == "/v1/models" and method == "GET":
            await self._models(ex, headers)
            return
        dialect = self.dialects.get(rt.endpoint) if method == "POST" else None
        protocol = dialect.name if dialect else None
        if dialect and self.config.require_auth and not dialect.authorized(headers):
            await deliver(ex, self._outcome(dialect.auth_error(), []), lambda _phase: None)
            return
        seq = next_seq()
        base = [(dialect.request_id_header, dialect.request_id(seq))] if dialect else []
        model = body.get("model") if isinstance(body, dict) else None
        stream = isinstance(body, dict) and body.get("stream") is True
        spec = (
            self.script.take(protocol, model, path, stream)
            if self.script.rules and method == "POST"
            else None
        )
        cfg = self.config
        knobs = (
            (rt.delay_ms if rt.delay_ms is not None else cfg.delay_ms) / 1000,
            (rt.chunk_delay_ms if rt.chunk_delay_ms is not None else cfg.chunk_delay_ms) / 1000,
        )

        def default(text: str | None) -> Outcome:
            if dialect is None:
                return self._invalid_url(method, path)
            return self._default(dialect, body, seq, rt, text, base, headers)

        if spec is not None:
            out = scripted_outcome(spec, dialect, self.fixtures, default, base, knobs)
        else:
            out = default(None)
            out.delay_s, out.chunk_delay_s = knobs

        def on_gone(phase: str) -> None:
            self.journal.event(
                "client_disconnected",
                method=method,
                path=path,
                protocol=protocol,
                model=model,
                phase=phase,
                after_ms=ex.elapsed_ms(),
                frames_sent=ex.frames_sent,
            )

        await deliver(ex, out, on_gone)


def create_app(
    fixtures_dir: Path | None = None, *, require_auth: bool = True, record_max: int = 10_000
) -> MockProvider:
    """Build the ASGI app with defaults (for embedding; the CLI builds a :class:`MockConfig` itself)."""
    return MockProvider(MockConfig(fixtures_dir or default_fixtures_dir(), require_auth, record_max))
