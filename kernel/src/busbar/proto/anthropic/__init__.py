"""The Anthropic Messages dialect (``/v1/messages``); ``DIALECT`` is the singleton."""

from busbar.proto.anthropic.dialect import DIALECT

__all__ = ["DIALECT"]
