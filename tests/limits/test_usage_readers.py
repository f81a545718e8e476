"""The cheap usage reader (``busbar.proto.usage_readers``) gives the figures the full reply reader
gives, for every dialect's captured reply fixtures, and falls back for a dialect it does not know.
docs/limits.md#settlement.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from busbar.ir.model import Usage
from busbar.proto.registry import DIALECTS
from busbar.proto.usage_readers import READERS, read_usage

FIXTURES = Path(__file__).resolve().parents[2] / "tools/mock-provider/src/busbar_mock_provider/fixtures"
DIRS = {"openai-chat": "openai", "openai-responses": "responses", "anthropic": "anthropic", "gemini": "gemini",
        "bedrock": "bedrock"}
CASES = [(DIRS[p.parent.name], p) for p in sorted(FIXTURES.glob("*/*.response.json"))
         if p.parent.name in DIRS and not p.name.startswith("error-")]


def test_every_known_dialect_has_fixtures() -> None:
    assert {d for d, _ in CASES} == {"openai", "responses", "anthropic", "gemini", "bedrock"}
    assert set(READERS) == {"openai", "responses", "anthropic", "gemini", "bedrock", "cohere"}


@pytest.mark.parametrize(("dialect", "path"), CASES, ids=[f"{d}:{p.name}" for d, p in CASES])
def test_the_usage_reader_matches_the_full_reader(dialect: str, path: Path) -> None:
    d = DIALECTS[dialect]
    doc = orjson.loads(path.read_bytes())
    want = d.read_response(doc).usage
    assert read_usage(d, doc) == want
    assert want != Usage()                  # the fixture does carry usage


def test_exact_figures_and_the_fallback() -> None:
    doc = {"id": "x", "choices": "not even a list",
           "usage": {"prompt_tokens": 900, "completion_tokens": 200, "total_tokens": 1100}}
    assert read_usage(DIALECTS["openai"], doc) == Usage(input_tokens=900, output_tokens=200)
    assert read_usage(DIALECTS["openai"], {"usage": None}) == Usage()
    assert read_usage(DIALECTS["gemini"], {"usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 7}}) \
        == Usage(input_tokens=5, output_tokens=7)

    @dataclass
    class Other:
        name: str = "plugin-dialect"

        def read_response(self, doc: dict) -> object:
            return type("R", (), {"usage": Usage(input_tokens=doc["n"])})()

    assert read_usage(Other(), {"n": 3}) == Usage(input_tokens=3)    # type: ignore[arg-type]
