"""The request-body nesting cap: exact boundary and the field a refusal names."""
from __future__ import annotations

import orjson
import pytest
from busbar.server.jsondepth import MAX_JSON_DEPTH, deep_field, too_deep


def _nest(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize("inner, expected", [(125, False), (126, True)])
def test_the_boundary_is_exact(inner: int, expected: bool) -> None:
    raw = ('{"a":[{"b":' + _nest(inner) + '}]}').encode()     # depth = 3 + inner
    assert MAX_JSON_DEPTH == 128
    assert too_deep(orjson.loads(raw), raw) is expected


def test_probe_leaves_no_reference_behind() -> None:
    from busbar.server import jsondepth
    body = {"x": 1, "pad": "[" * 300}
    assert too_deep(body, orjson.dumps(body)) is False       # probed (300 brackets in a string), fits
    assert jsondepth._INNER[0] is None


def test_bodies_with_few_brackets_are_not_probed() -> None:
    deep = orjson.loads(_nest(200))
    few = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH   # wire bytes with 128 brackets: never too deep
    assert too_deep(deep, few) is False                      # the count alone decides: no probe
    assert too_deep(deep, _nest(200).encode()) is True


@pytest.mark.parametrize("text, path", [
    ('{"model":"m","metadata":' + _nest(200) + "}", "metadata"),
    ('{"messages":[{"role":"user","content":' + _nest(200) + "}]}", "messages[0].content"),
    ('{"a":{"b":{"c":{"d":' + _nest(200) + "}}}}", "a.b.c"),
    (_nest(200), ""),
])
def test_deep_field_names_the_path(text: str, path: str) -> None:
    assert deep_field(orjson.loads(text)) == path
