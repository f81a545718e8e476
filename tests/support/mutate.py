"""Hypothesis helpers for valid-then-mutated inputs: any JSON value, and one value of a JSON
document replaced by it (the decoder fuzz and the request-reader fuzz share them)."""
from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value, small (big integers and floats included)."""


def paths(obj: Any, at: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``obj`` (dict keys and list indexes), ``()`` for ``obj`` itself."""
    out = [at]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += paths(v, (*at, i))
    return out


def replaced(obj: Any, pick: int, value: Any) -> Any:
    """A deep copy of ``obj`` with the value at ``paths(obj)[pick % n]`` replaced by ``value``."""
    where = paths(obj)[pick % len(paths(obj))]
    if not where:
        return value
    out = copy.deepcopy(obj)
    parent = out
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = value
    return out
