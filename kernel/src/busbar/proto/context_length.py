"""The providers' context-length error wordings, in one table.

A 400/413 whose code, type or message matches one of ``WORDINGS`` is disposition
``context_length``: no penalty on the lane, fail over to a member with a larger ``context_max``
(``docs/reliability.md#context-length-failover``). Each entry names who says it and carries a
real message of that shape (``example``), which ``tests/unit/proto/test_context_length.py``
checks against the table one by one. Add a wording here, with its example, when a provider
words it another way.

Matching is case-insensitive and anywhere in ``"<code> <type> <message>"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Wording:
    """One known wording: ``source`` (who says it), ``pattern`` (a regex), ``example`` (a real message)."""

    source: str
    pattern: str
    example: str


WORDINGS: tuple[Wording, ...] = (
    Wording("OpenAI, Azure OpenAI, Groq (error code)", r"context_length_exceeded",
            "context_length_exceeded"),
    Wording("OpenAI, Azure OpenAI, DeepSeek, vLLM, OpenRouter, Mistral", r"maximum context length",
            "This model's maximum context length is 8192 tokens. However, your messages resulted in "
            "8202 tokens. Please reduce the length of the messages."),
    Wording("OpenAI Responses", r"exceeds the context window",
            "Your input exceeds the context window of this model. Please adjust your input and try again."),
    Wording("Anthropic, Claude on Bedrock and Vertex AI", r"prompt is too long",
            "prompt is too long: 208000 tokens > 200000 maximum"),
    Wording("Anthropic (input plus max_tokens)", r"input length and \W?max_tokens\W? exceed context limit",
            "input length and `max_tokens` exceed context limit: 8000 + 1024 > 8192, decrease input "
            "length or `max_tokens` and try again"),
    Wording("Gemini, Vertex AI", r"input token count \(?\d*\)? exceeds the maximum number of tokens",
            "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."),
    Wording("Bedrock", r"input is too long", "Input is too long for requested model."),
    Wording("Bedrock Converse", r"too many input tokens", "Too many input tokens. Max input tokens: 8000, "
            "request input token count: 9000"),
    Wording("Cohere", r"too many tokens",
            "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 4200. "
            "Try using a shorter prompt, or enabling prompt truncating."),
    Wording("xAI", r"maximum prompt length",
            "This model's maximum prompt length is 131072 but the request contains 150000 tokens."),
    Wording("Hugging Face TGI (Together, Inference Endpoints)",
            r"\W?inputs\W? tokens \+ \W?max_new_tokens\W? must be <=",
            "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: 8000 "
            "`inputs` tokens and 1024 `max_new_tokens`"),
    Wording("SGLang", r"exceeds the maximum allowed length",
            "Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens)."),
    Wording("llama.cpp server", r"exceeds the available context size",
            "the request exceeds the available context size, try increasing it"),
    Wording("generic (any provider naming its context length or window)", r"context[ _](?:length|window)",
            "request exceeds the model's context window"),
)
"""Every known wording (order does not matter: any match counts)."""

_ANY = re.compile("|".join(f"(?:{w.pattern})" for w in WORDINGS), re.IGNORECASE)


def says_context_length(code: str | None, type_: str | None, message: str) -> bool:
    """Whether an upstream error (its ``code``, ``type`` and ``message``) says the context is too long."""
    return _ANY.search(f"{code or ''} {type_ or ''} {message}") is not None


def matching(text: str) -> list[Wording]:
    """The table entries whose pattern occurs in ``text`` (for tests and diagnostics)."""
    return [w for w in WORDINGS if re.search(w.pattern, text, re.IGNORECASE)]
