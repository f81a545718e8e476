"""The Cohere v2 Chat dialect (``/v2/chat``); ``DIALECT`` is the singleton."""

from busbar.proto.cohere.dialect import DIALECT

__all__ = ["DIALECT"]
