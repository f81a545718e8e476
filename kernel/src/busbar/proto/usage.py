"""Reading a provider's flat usage object into the IR ``Usage``."""

from __future__ import annotations

from typing import Any

from busbar.ir.model import Usage


def read_counts(u: dict[str, Any] | None, input_key: str, output_key: str, cache_read_key: str,
                cache_write_key: str) -> Usage:
    """``Usage`` from ``u[input_key]`` … (absent or null counters read as 0; ``None`` -> zero usage)."""
    if not u:
        return Usage()
    return Usage(
        input_tokens=u.get(input_key) or 0,
        output_tokens=u.get(output_key) or 0,
        cache_read_tokens=u.get(cache_read_key) or 0,
        cache_write_tokens=u.get(cache_write_key) or 0,
    )
