"""The OpenAI Chat Completions dialect (``/v1/chat/completions``); ``DIALECT`` is the singleton."""

from busbar.proto.openai.dialect import DIALECT

__all__ = ["DIALECT"]
