"""Property tests for the structural-equivalence check (docs/security.md#5-var-interpolation-structure-preserving).

- Soundness: whatever the value, interpolation either refuses or yields a document with the template's shape.
- No false positives: punctuation that does not change the shape (quoted scalars, block scalars, comments)
  is accepted and round-trips exactly.
- No false negatives: ``,`` / ``"`` / ``'`` splices inside flow collections that widen them are refused,
  naming the variable.
"""
from __future__ import annotations

from typing import Any

import yaml
from busbar.config.interpolate import InterpolationError, interpolate
from hypothesis import given, settings
from hypothesis import strategies as st

PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F)) + "éß€中😀"
PUNCT = ":/@.-#\",{}[]&*!|>'%?=+~`^;()<>\\ "
values = st.text(alphabet=PRINTABLE, max_size=40)
punct_values = st.text(alphabet=PUNCT + "abc019", max_size=30)
safe_words = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,11}", fullmatch=True)

TEMPLATES = [
    "k: ${V}\n",
    'k: "${V}"\n',
    "k: '${V}'\n",
    "t: [ ${V} ]\n",
    't: [ "${V}" ]\n',
    "t: [ '${V}' ]\n",
    "t: [a, ${V}, b]\n",
    "m: {a: ${V}, b: 1}\n",
    'm: {a: "${V}", b: 1}\n',
    "m: {a: '${V}', b: 1}\n",
    "k: |\n  x ${V}\n",
    "k: >-\n  ${V}\n",
    "# ${V}\nk: 1\n",
    "auth:\n  client_tokens: [ \"${V}\" ]\n  other: [${V}, ${V}]\n",
    "- ${V}\n- b\n",
    "k: pre-${V}-post\n",
]


def shape(node: Any) -> Any:
    if isinstance(node, dict):
        return ("map", tuple((k, shape(v)) for k, v in node.items()))
    if isinstance(node, list):
        return ("seq", tuple(shape(v) for v in node))
    return "scalar"


@settings(deadline=None, max_examples=300)
@given(template=st.sampled_from(TEMPLATES), value=st.one_of(values, punct_values))
def test_refuse_or_keep_the_shape(template: str, value: str) -> None:
    reference = shape(yaml.safe_load(template.replace("${V}", "placeholder")))
    try:
        out = interpolate(template, {"V": value})
    except InterpolationError as e:  # the only exception allowed: no traceback, no YAMLError
        assert e.faults and all("\n" not in f for f in e.faults)
        return
    assert shape(yaml.safe_load(out)) == reference


@settings(deadline=None)
@given(value=st.text(alphabet=PRINTABLE.replace('"', "").replace("\\", ""), max_size=40))
def test_double_quoted_values_without_quote_or_backslash_round_trip(value: str) -> None:
    for template in ('t: [ "${V}" ]\n', 'm: {a: "${V}", b: 1}\n', 'k: "${V}"\n'):
        data = yaml.safe_load(interpolate(template, {"V": value}))
        got = data.get("t", [None])[0] if "t" in data else data.get("m", {}).get("a", data.get("k"))
        assert got == value


@settings(deadline=None)
@given(value=st.text(alphabet=PRINTABLE.replace("'", ""), max_size=40))
def test_single_quoted_values_without_quote_round_trip(value: str) -> None:
    data = yaml.safe_load(interpolate("t: [ '${V}' ]\nk: '${V}'\n", {"V": value}))
    assert data == {"t": [value], "k": value}


@settings(deadline=None)
@given(value=values)
def test_block_scalars_and_comments_accept_anything_single_line(value: str) -> None:
    data = yaml.safe_load(interpolate("# note: ${V}\nk: |\n  x ${V}\nn: 1\n", {"V": value}))
    assert data == {"k": f"x {value}\n", "n": 1}


@settings(deadline=None)
@given(a=safe_words, b=safe_words)
def test_double_quote_splice_in_flow_sequence_is_refused(a: str, b: str) -> None:
    _assert_refused('auth:\n  client_tokens: [ "${TOKENS}" ]\n', f'{a}", "{b}',
                    "auth.client_tokens (sequence length 1 -> 2)")


@settings(deadline=None)
@given(a=safe_words, b=safe_words)
def test_single_quote_splice_in_flow_sequence_is_refused(a: str, b: str) -> None:
    _assert_refused("t: [ '${TOKENS}' ]\n", f"{a}', '{b}", "t (sequence length 1 -> 2)")


@settings(deadline=None)
@given(a=safe_words, b=safe_words)
def test_comma_splice_in_plain_flow_sequence_is_refused(a: str, b: str) -> None:
    _assert_refused("t: [ ${TOKENS} ]\n", f"{a}, {b}", "t (sequence length 1 -> 2)")


@settings(deadline=None)
@given(a=safe_words, b=safe_words)
def test_key_splice_in_flow_map_is_refused(a: str, b: str) -> None:
    _assert_refused('m: {x: "${TOKENS}"}\n', f'{a}", injected: "{b}', "m (map with 1 entries -> 2)")


def _assert_refused(template: str, value: str, where: str) -> None:
    try:
        interpolate(template, {"TOKENS": value})
    except InterpolationError as e:
        [fault] = e.faults
        assert fault.endswith(f": the value of ${{TOKENS}} changes the YAML structure at {where}; use a "
                              f"{{ file: ... }} secret reference instead")
    else:
        raise AssertionError(f"splice accepted: {value!r}")
