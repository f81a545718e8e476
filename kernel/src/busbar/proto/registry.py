"""The dialect registry: wire-protocol name -> its ``Dialect`` singleton.

Holds ``openai`` (Chat Completions) and ``anthropic`` (Messages); later dialects (responses,
gemini, bedrock, cohere) register here the same way. Frozen at import; nothing registers at
runtime.

Source: docs/protocols/README.md#one-protocol--modules-of-one-job-each (``ProtocolRegistry::with_builtins`` constructs
all six).
"""

from __future__ import annotations

from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.base import Dialect
from busbar.proto.bedrock import DIALECT as BEDROCK
from busbar.proto.bedrock.invoke import DIALECT as BEDROCK_INVOKE
from busbar.proto.cohere import DIALECT as COHERE
from busbar.proto.gemini import DIALECT as GEMINI
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.responses import DIALECT as RESPONSES

DIALECTS: dict[str, Dialect] = {
    OPENAI.name: OPENAI,
    ANTHROPIC.name: ANTHROPIC,
    GEMINI.name: GEMINI,
    BEDROCK.name: BEDROCK,
    BEDROCK_INVOKE.name: BEDROCK_INVOKE,  # Anthropic Messages on /model/{id}/invoke (an adapter)
    RESPONSES.name: RESPONSES,
    COHERE.name: COHERE,
}
"""Every built-in dialect by ``Dialect.name``."""


def get_dialect(name: str) -> Dialect:
    """The dialect named ``name``.

    Raises:
        KeyError: no such dialect (the message lists the known names).
    """
    try:
        return DIALECTS[name]
    except KeyError:
        raise KeyError(f"unknown dialect {name!r}; known: {', '.join(sorted(DIALECTS))}") from None
