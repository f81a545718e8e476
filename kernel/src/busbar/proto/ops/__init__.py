"""Wire codecs of the operations beyond chat (embeddings, rerank), one module per protocol.

An *op codec* is to one (operation, protocol) pair what a dialect is to chat: it reads the
client's body into the operation's IR (``busbar.ir.ops``), writes the IR as a provider body, reads
the provider's answer back and writes the client's answer. ``codec(operation, protocol)`` finds it
(``None``: that protocol cannot serve that operation). See ``busbar.proto.ops.base.OpCodec``.

Source: docs/beyond-chat.md#the-operations-matrix.
"""
from __future__ import annotations

from busbar.proto.ops.audio import CODEC as AUDIO_OPENAI
from busbar.proto.ops.audio_gemini import CODEC as AUDIO_GEMINI
from busbar.proto.ops.base import OpCodec
from busbar.proto.ops.embed_bedrock import CODEC as EMBED_BEDROCK
from busbar.proto.ops.embed_cohere import CODEC as EMBED_COHERE
from busbar.proto.ops.embed_gemini import CODEC as EMBED_GEMINI
from busbar.proto.ops.embed_openai import CODEC as EMBED_OPENAI
from busbar.proto.ops.images import BEDROCK as IMAGES_BEDROCK
from busbar.proto.ops.images import GEMINI as IMAGES_GEMINI
from busbar.proto.ops.images import OPENAI as IMAGES_OPENAI
from busbar.proto.ops.moderation import CODEC as MODERATION_OPENAI
from busbar.proto.ops.rerank import BEDROCK as RERANK_BEDROCK
from busbar.proto.ops.rerank import COHERE as RERANK_COHERE

CODECS: dict[tuple[str, str], OpCodec] = {
    ("embeddings", "openai"): EMBED_OPENAI,
    ("embeddings", "cohere"): EMBED_COHERE,
    ("embeddings", "gemini"): EMBED_GEMINI,
    ("embeddings", "bedrock"): EMBED_BEDROCK,
    ("rerank", "cohere"): RERANK_COHERE,
    ("rerank", "bedrock"): RERANK_BEDROCK,
    ("moderation", "openai"): MODERATION_OPENAI,
    ("images", "openai"): IMAGES_OPENAI,
    ("images", "gemini"): IMAGES_GEMINI,
    ("images", "bedrock"): IMAGES_BEDROCK,
    ("audio", "openai"): AUDIO_OPENAI,
    ("audio", "gemini"): AUDIO_GEMINI,
}
"""Every (operation, provider protocol) this build serves."""


def codec(operation: str, protocol: str) -> OpCodec | None:
    """The codec of ``operation`` on ``protocol`` (a provider protocol name), or ``None``."""
    return CODECS.get((operation, protocol))
