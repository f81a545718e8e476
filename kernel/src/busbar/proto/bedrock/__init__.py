"""The Bedrock Converse dialect (``/model/{id}/converse[-stream]``); ``DIALECT`` is the singleton.

``busbar.proto.bedrock.invoke.DIALECT`` is the ``bedrock-invoke`` adapter (Anthropic Messages on
``/model/{id}/invoke[-with-response-stream]``).
"""

from busbar.proto.bedrock.dialect import DIALECT

__all__ = ["DIALECT"]
