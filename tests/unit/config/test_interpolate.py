"""``${VAR}`` interpolation: docs/security.md#5-var-interpolation-structure-preserving (syntax, error cases, structural
check)."""
from __future__ import annotations

import busbar.config.interpolate as interp
import pytest
import yaml
from busbar.config.errors import ConfigError
from busbar.config.interpolate import InterpolationError, interpolate, interpolate_and_parse


def faults(text: str, env: dict[str, str], source: str = "config.yaml") -> list[str]:
    with pytest.raises(InterpolationError) as exc:
        interpolate(text, env, source=source)
    assert str(exc.value) == "\n".join(exc.value.faults)
    return exc.value.faults


# --- syntax -----------------------------------------------------------------------------------------

def test_brace_form_is_expanded_and_bare_form_is_not() -> None:
    text = 'base_url: "https://${LLM_GATEWAY_HOST}/v1"\nother: $LLM_GATEWAY_HOST and $$ and $ {X}\n'
    assert interpolate(text, {"LLM_GATEWAY_HOST": "gw.internal:8443"}) == (
        'base_url: "https://gw.internal:8443/v1"\nother: $LLM_GATEWAY_HOST and $$ and $ {X}\n')


def test_comments_are_interpolated_too() -> None:
    text = "a: 1\n# base_url: https://${OLD_HOST}/v1\n"
    assert interpolate(text, {"OLD_HOST": "old.example"}) == "a: 1\n# base_url: https://old.example/v1\n"
    assert faults(text, {}) == ["config.yaml:2: unset environment variable: OLD_HOST"]


def test_secret_references_are_not_interpolation() -> None:
    text = "providers:\n  internal:\n    api_key: { env: INTERNAL_KEY }\n"
    assert interpolate(text, {}) is text


def test_text_without_references_is_returned_untouched_without_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(interp, "_parse", boom)
    text = "listen: 0.0.0.0:8080\n# $HOME {x}\nbad: [yaml\n"
    assert interpolate(text, {}) is text


def test_empty_value_is_set_not_unset() -> None:
    assert interpolate('prefix: "${P}"\n', {"P": ""}) == 'prefix: ""\n'


def test_repeated_references_and_adjacent_references() -> None:
    assert interpolate("a: ${X}${X}-${Y}\nb: ${X}\n", {"X": "1", "Y": "2"}) == "a: 11-2\nb: 1\n"


def test_scalar_type_changes_are_fine() -> None:
    text, data = interpolate_and_parse("port: ${PORT}\nenabled: ${FLAG}\nn: !!int ${N}\n",
                                       {"PORT": "8080", "FLAG": "true", "N": "3"})
    assert data == {"port": 8080, "enabled": True, "n": 3}
    assert text == "port: 8080\nenabled: true\nn: !!int 3\n"


def test_interpolation_error_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        interpolate("a: ${NOPE}\n", {})


# --- error cases, exact messages --------------------------------------------------------------------

def test_unset_variable() -> None:
    text = "providers:\n  internal:\n    base_url: https://${ANTHROPIC_HOST}/v1\n"
    assert faults(text, {}) == ["config.yaml:3: unset environment variable: ANTHROPIC_HOST"]


def test_unset_variable_reported_once_at_first_use() -> None:
    assert faults("a: ${H}\nb: ${H}\n", {}) == ["config.yaml:1: unset environment variable: H"]


def test_unclosed_reference() -> None:
    assert faults("a: 1\nb: https://${HOST/v1\nc: ${OK}\n", {"OK": "x"}) == [
        "config.yaml:2: unclosed variable reference '${HOST/v1' at column 12 (no closing '}' on that line)"]


def test_unclosed_reference_does_not_swallow_the_next_line() -> None:
    assert faults("a: ${A\nb: x}\n", {}) == [
        "config.yaml:1: unclosed variable reference '${A' at column 4 (no closing '}' on that line)"]


def test_unclosed_at_end_of_file() -> None:
    assert faults("a: ${", {}) == [
        "config.yaml:1: unclosed variable reference '${' at column 4 (no closing '}' on that line)"]


def test_nested_opening_is_unclosed() -> None:
    assert faults("a: ${A${B}\n", {"B": "x"}) == [
        "config.yaml:1: unclosed variable reference '${A' at column 4 (no closing '}' on that line)"]


def test_empty_name() -> None:
    assert faults("a: 1\nb: x${}y\n", {}) == ["config.yaml:2: empty variable name in ${}"]


@pytest.mark.parametrize("ref", ["${9X}", "${A:-b}", "${ A }", "${A-B}"])
def test_invalid_name(ref: str) -> None:
    name = ref[2:-1]
    assert faults(f"a: {ref}\n", {}) == [
        f"config.yaml:1: invalid variable name in ${{{name}}}: use letters, digits and _ (not starting with "
        f"a digit); defaults like ${{VAR:-x}} are not supported"]


CONTROL = ["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\x80", "\x85", "\x9f", "\u2028", "\u2029"]


@pytest.mark.parametrize("ch", CONTROL, ids=[f"U+{ord(c):04X}" for c in CONTROL])
def test_control_character_in_value(ch: str) -> None:
    value = f"topsecret{ch}injected: true"
    [fault] = faults("a:\n  b: ${EVIL}\n", {"EVIL": value})
    assert fault == (f"config.yaml:2: environment variable EVIL contains a control character "
                     f"(U+{ord(ch):04X}); values must be one line without control characters "
                     f"(newline-based YAML injection guard); for multi-line values use a {{ file: ... }} "
                     f"secret reference instead")
    assert "topsecret" not in fault


def test_all_faults_are_collected_in_file_order() -> None:
    text = "a: ${A}\n# ${B}\nc: ${}\nd: ${D\ne: ${9x}\nf: ${A}\n"
    got = faults(text, {"A": "x\ny"}, source="providers.yaml")
    assert got == [
        "providers.yaml:1: environment variable A contains a control character (U+000A); values must be one "
        "line without control characters (newline-based YAML injection guard); for multi-line values use a "
        "{ file: ... } secret reference instead",
        "providers.yaml:2: unset environment variable: B",
        "providers.yaml:3: empty variable name in ${}",
        "providers.yaml:4: unclosed variable reference '${D' at column 4 (no closing '}' on that line)",
        "providers.yaml:5: invalid variable name in ${9x}: use letters, digits and _ (not starting with a "
        "digit); defaults like ${VAR:-x} are not supported",
    ]


def test_line_numbers_follow_yaml_line_breaks() -> None:
    assert faults("a: 1\r\nb: 2\rc: ${X}\n", {}) == ["config.yaml:3: unset environment variable: X"]


# --- structural equivalence -------------------------------------------------------------------------

SPLICE = "auth:\n  client_tokens: [ \"${TOKENS}\" ]\n"


def test_flow_sequence_splice_is_refused_with_the_variable_named() -> None:
    assert faults(SPLICE, {"TOKENS": 'tok-a", "tok-b'}) == [
        "config.yaml:2: the value of ${TOKENS} changes the YAML structure at auth.client_tokens (sequence "
        "length 1 -> 2); use a { file: ... } secret reference instead"]


def test_plain_comma_in_flow_sequence_is_refused() -> None:
    assert faults("tokens: [${A}, ${B}]\n", {"A": "x", "B": "y, z"}) == [
        "config.yaml:1: the value of ${B} changes the YAML structure at tokens (sequence length 2 -> 3); "
        "use a { file: ... } secret reference instead"]


def test_single_quote_splice_is_refused() -> None:
    assert faults("t: ['${A}']\n", {"A": "x', 'y"}) == [
        "config.yaml:1: the value of ${A} changes the YAML structure at t (sequence length 1 -> 2); use a "
        "{ file: ... } secret reference instead"]


def test_flow_map_splice_is_refused_even_when_it_only_duplicates_a_key() -> None:
    # {a: "x", b: "3", b: 1}: safe_load would keep 2 keys and silently drop one; we count entries.
    assert faults('m: {b: 1, a: "${V}"}\n', {"V": 'x", b: "3'}) == [
        "config.yaml:1: the value of ${V} changes the YAML structure at m (map with 2 entries -> 3); use a "
        "{ file: ... } secret reference instead"]


def test_kind_change_is_refused() -> None:
    assert faults("pools:\n  chat:\n    members: ${M}\n", {"M": "[a, b]"}) == [
        "config.yaml:3: the value of ${M} changes the YAML structure at pools.chat.members (scalar -> "
        "sequence); use a { file: ... } secret reference instead"]
    assert faults("x: [${M}]\n", {"M": "{k: v}"}) == [
        "config.yaml:1: the value of ${M} changes the YAML structure at x[0] (scalar -> map); use a "
        "{ file: ... } secret reference instead"]


def test_empty_value_in_flow_sequence_shrinks_it() -> None:
    assert faults("x: [${M}]\n", {"M": ""}) == [
        "config.yaml:1: the value of ${M} changes the YAML structure at x (sequence length 1 -> 0); use a "
        "{ file: ... } secret reference instead"]


def test_several_culprits_in_one_collection() -> None:
    got = faults("x: [${A}, ${B}, ${C}]\n", {"A": "1, 2", "B": "ok", "C": "3, 4"})
    assert got == ["config.yaml:1: the values of ${A}, ${C} change the YAML structure at x (sequence length "
                   "3 -> 5); use a { file: ... } secret reference instead"]


def test_interpolated_keys_may_vary() -> None:
    _text, data = interpolate_and_parse("models:\n  ${PREFIX}-chat: {provider: a}\n", {"PREFIX": "team"})
    assert data == {"models": {"team-chat": {"provider": "a"}}}


def test_structure_fault_path_names_interpolated_key() -> None:
    assert faults("models:\n  ${P}-chat: [${X}]\n", {"P": "t", "X": "a, b"}) == [
        "config.yaml:2: the value of ${X} changes the YAML structure at models.${P}-chat (sequence length "
        "1 -> 2); use a { file: ... } secret reference instead"]


@pytest.mark.parametrize("template, value", [
    ('dn: "${V}"\n', "cn=svc,ou=People,dc=example,dc=com"),  # LDAP DN, commas
    ("path: '${V}'\n", r"C:\Program Files\Busbar\cfg"),  # Windows path
    ("url: ${V}\n", "https://h.example/p?a=1&b=[2]&c={3}#frag"),  # URL with query
    ('t: [ "${V}" ]\n', "a, b: {c} [d] & *e !f"),
    ("t: [ '${V}' ]\n", 'say "hi", {ok}'),
    ("k: |\n  line ${V}\n", "a: b, [c], {d}, \"e\", 'f', # g"),
    ("k: >\n  ${V}\n", "- item: [1, 2]"),
    ("# comment ${V}\nk: 1\n", "a\", b: [c"),
    ("m: {a: \"${V}\", b: 1}\n", "x, y: z"),
])
def test_punctuation_that_keeps_the_shape_is_accepted(template: str, value: str) -> None:
    out = interpolate(template, {"V": value})
    assert yaml.safe_load(out) is not None or template.startswith("#")


# --- YAML errors: reported as faults, never a traceback, never the value ----------------------------

def test_double_quote_inside_double_quoted_scalar_is_a_clear_yaml_error() -> None:
    [fault] = faults('providers:\n  a:\n    base_url: "${URL}"\n', {"URL": 'https://x"topsecret'})
    assert fault == (
        "config.yaml:3: invalid YAML after substituting ${URL}: expected <block end>, but found '<scalar>' "
        "(while parsing a block mapping); the value of ${URL} contains '\"' or '\\' and is substituted inside a double-quoted "
        "scalar, which it ends or escapes; use a { file: ... } secret reference instead")


def test_json_blob_in_double_quoted_scalar_is_refused() -> None:
    [fault] = faults('cfg: "${JSON}"\n', {"JSON": '{"key": "topsecret"}'})
    assert fault.startswith("config.yaml:1: invalid YAML after substituting ${JSON}: ")
    assert "topsecret" not in fault


def test_value_that_breaks_plain_syntax_is_a_yaml_error_naming_it() -> None:
    [fault] = faults("k: ${V}\n", {"V": "a: b"})
    assert fault.startswith("config.yaml:1: invalid YAML after substituting ${V}: mapping values are not "
                            "allowed")


def test_constructor_error_is_attributed() -> None:
    assert faults("port: !!int ${P}\n", {"P": "80x"}) == [
        "config.yaml:1: invalid YAML value after substituting ${P}: invalid literal for int() with base 10: "
        "'…'; check the value against the type the template declares"]


def test_template_that_is_not_yaml_is_reported_without_traceback() -> None:
    assert faults("a: [1\nb: ${X}\n", {"X": "1"}) == [
        "config.yaml:2: invalid YAML: expected ',' or ']', but got ':' (while parsing a flow sequence)"]


def test_template_errors_and_unset_variables_together() -> None:
    got = faults("a: [1\nb: ${X}\n", {})
    assert got[0] == "config.yaml:2: unset environment variable: X"
    assert got[1].startswith("config.yaml:2: invalid YAML: ")


def test_interpolate_and_parse_without_references() -> None:
    assert interpolate_and_parse("a: 1\n", {}) == ("a: 1\n", {"a": 1})
    with pytest.raises(InterpolationError) as exc:
        interpolate_and_parse("a: [1\n", {}, source="providers.yaml")
    assert exc.value.faults[0].startswith("providers.yaml:2: invalid YAML: ")


def test_recursive_aliases_do_not_hang() -> None:
    out = interpolate("a: &x [*x, ${V}]\n", {"V": "1"})
    assert out == "a: &x [*x, 1]\n"


def test_placeholder_prefix_avoids_collisions() -> None:
    assert interpolate("bbPH0Z: ${A}\nbbPHQ0Z: 1\n", {"A": "v"}) == "bbPH0Z: v\nbbPHQ0Z: 1\n"
