"""The OpenAI Responses dialect (``/v1/responses``); ``DIALECT`` is the singleton."""

from busbar.proto.responses.dialect import DIALECT

__all__ = ["DIALECT"]
