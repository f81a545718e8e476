"""busbar-mock-provider: a provider-faithful mock upstream with fault injection.

The upstream that Busbar's tests, demo and benchmarks talk to instead of real providers. It serves
OpenAI Chat Completions and Anthropic Messages with the wire shapes of the real captures in
``fixtures/`` (package data) (JSON and SSE), and injects faults per request through a JSON control API.

Modules (one role each):
    __main__     the CLI (``busbar-mock-provider``), uvicorn start-up, ready line
    app          the raw ASGI app: routing, auth, request log, script lookup, default replies
    routing      path prefix and gwbench knobs (/d<ms>, /c<n>, /i<ms>)
    control      the ``/_mock/*`` control API
    faults       script rules: validation and FIFO matching
    scripted     turning a scripted response into an outcome (bytes, status, headers, faults)
    wire         ASGI plumbing: delays, pacing, aborts, in-band errors, disconnect detection
    journal      request and event logs
    reply        protocol-neutral default replies (text, tool calls, stop, max_tokens)
    base         the Dialect seam every protocol implements
    openai_chat  OpenAI Chat Completions shapes and errors
    anthropic    Anthropic Messages shapes and errors
    fixtures     locating, reading and framing the captures
    process      ``MockProcess``: run it as a subprocess from tests

Docs: docs/mock-provider.md.
"""

from .app import MockConfig, MockProvider, create_app

__all__ = ["MockConfig", "MockProvider", "create_app"]
