"""Client-chosen model names (busbar.modelname): refusals and encodings, exact values."""
from __future__ import annotations

from urllib.parse import unquote

import pytest
from busbar.modelname import header_value, name_fault, path_segment

SEGMENT = "a model name is one path segment (no '.', '..' or empty parts between '/')"


@pytest.mark.parametrize(("name", "fault"), [
    ("", f"the model name has an empty path segment; {SEGMENT}"),
    ("..", f"the model name has a '..' path segment; {SEGMENT}"),
    ("../../x", f"the model name has a '..' path segment; {SEGMENT}"),
    ("a/./b", f"the model name has a '.' path segment; {SEGMENT}"),
    ("a/", f"the model name has an empty path segment; {SEGMENT}"),
    ("/a", f"the model name has an empty path segment; {SEGMENT}"),
    ("a\r\nb", "the model name contains the control character U+000D; a model name is printable text"),
    ("a\x00", "the model name contains the control character U+0000; a model name is printable text"),
    ("a\x9bb", "the model name contains the control character U+009B; a model name is printable text"),
])
def test_refused(name, fault):
    assert name_fault(name) == fault


@pytest.mark.parametrize("name", ["gpt-4o", "a..b", "...", ".hidden", "a/b", "模型🚀", "a b", "x?y#z%",
                                  "arn:aws:bedrock:us-east-1:1:inference-profile/us.x:0"])
def test_accepted(name):
    assert name_fault(name) is None


def test_path_segment_never_leaves_its_segment():
    assert path_segment("a/../b:x?y#z%w") == "a%2F..%2Fb%3Ax%3Fy%23z%25w"
    assert path_segment("claude@2024", keep="@") == "claude@2024"
    assert path_segment("模") == "%E6%A8%A1"


def test_header_value_is_ascii_and_round_trips():
    assert header_value("gpt-4o") == "gpt-4o"
    assert header_value("模型 🚀") == "%E6%A8%A1%E5%9E%8B%20%F0%9F%9A%80"
    assert header_value("a%41\r\n") == "a%2541%0D%0A"
    for name in ("模型 🚀", "a%41", "us.x:0/y@z"):
        assert unquote(header_value(name)) == name
