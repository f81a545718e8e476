"""The operations a model can serve, and what each protocol serves in this build.

``models.*.operations`` lists operations from ``OPERATIONS``; unset, a model serves
``DEFAULT_OPERATIONS[protocol]`` (the catalog default: everything this build serves on that
protocol). Boot refuses a declared operation its protocol cannot serve here
(``busbar.config.validate_providers``), so a pool never names a model for an operation it has no
endpoint for. The proxy reads the result through ``lane_operations`` (``busbar.proxy.runtime``).

Source: docs/beyond-chat.md#declaring-what-a-model-serves.
"""
from __future__ import annotations

OPERATIONS = ("chat", "embeddings", "rerank", "moderation", "images", "audio")
"""Every operation name of the 1.5 format."""

DEFAULT_OPERATIONS: dict[str, frozenset[str]] = {
    "openai": frozenset({"chat", "embeddings", "moderation", "images", "audio"}),
    "cohere": frozenset({"chat", "embeddings", "rerank"}),
    "gemini": frozenset({"chat", "embeddings", "images", "audio"}),
    "bedrock": frozenset({"chat", "embeddings", "rerank", "images"}),
    "anthropic": frozenset({"chat"}),
    "responses": frozenset({"chat"}),
}
"""What each provider protocol serves in this build (= a model's default ``operations``)."""


def lane_operations(protocol: str, declared: list[str] | None) -> frozenset[str]:
    """The operations a lane serves: its model's ``operations``, else its protocol's default."""
    if declared is not None:
        return frozenset(declared)
    return DEFAULT_OPERATIONS.get(protocol, frozenset({"chat"}))


def operations_faults(protocol: str | None, declared: list[str]) -> list[str]:
    """One fault line per bad entry of a model's ``operations`` (empty: fine)."""
    faults: list[str] = []
    if not declared:
        faults.append("must list at least one operation (omit it for the protocol's default)")
    for op in declared:
        if op not in OPERATIONS:
            faults.append(f"'{op}' is not an operation; use {', '.join(OPERATIONS)}")
        elif protocol is not None and op not in DEFAULT_OPERATIONS.get(protocol, frozenset()):
            can = ", ".join(sorted(DEFAULT_OPERATIONS.get(protocol, frozenset())))
            faults.append(f"protocol {protocol} cannot serve {op} in this build (it serves {can}; "
                          f"see docs/beyond-chat.md)")
    if len(set(declared)) != len(declared):
        faults.append("lists an operation twice")
    return faults
