"""The Gemini dialect (``models/{model}:generateContent`` / ``:streamGenerateContent``).

``DIALECT`` is the singleton."""

from busbar.proto.gemini.dialect import DIALECT

__all__ = ["DIALECT"]
