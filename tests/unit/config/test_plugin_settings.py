"""busbar.config.plugin_settings: a hook instance's settings against its plugin's settings schema, one
line per fault at its key path under ``settings``, values never echoed but an enum miss."""
from __future__ import annotations

import json

from busbar.config.plugin_settings import schema_faults

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "additionalProperties": False, "required": ["url"],
    "properties": {
        "url": {"type": "string", "minLength": 1},
        "mode": {"enum": ["fast", "exact"]},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "token": {"type": "string", "maxLength": 8},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "minLength": 3}},
        "rules": {"type": "array", "items": {"type": "object", "required": ["when", "to"],
                                             "additionalProperties": False,
                                             "properties": {"when": {"type": "string"}, "to": {"type": "array"}}}},
        "extra": {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
        "either": {"type": ["integer", "string"]},
        "fixed": {"const": 1},
        "pattern": {"type": "string", "pattern": "^a"},
        "one": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
        "uniq": {"type": "array", "uniqueItems": True},
    },
}


def test_every_kind_of_fault_reads_as_documented_in_key_path_order() -> None:
    settings = {"mode": "slow", "ratio": 0, "token": "s3cr3t-value-long", "tags": [], "url": "",
                "rules": [{"when": 1, "to": []}, {"to": [], "what": 2}] + [{"when": "x", "to": []}] * 9
                + [{"when": 5, "to": []}],
                "extra": {"x-a": 1, "y": 2}, "either": 1.5, "fixed": 2, "pattern": "b", "nope": None,
                "one": "hunter2", "uniq": [1, 1]}
    assert schema_faults(SCHEMA, settings, "acme-hook") == [
        ("either", "expected an integer or a string, got float"),
        ("extra.y", "unknown setting for acme-hook (it takes nothing)"),
        ("fixed", "2 is not one of 1"),
        ("mode", "'slow' is not one of fast, exact"),
        ("nope", "unknown setting for acme-hook (it takes either, extra, fixed, mode, one, pattern, ratio, rules, "
                 "tags, token, uniq, url)"),
        ("one", "does not satisfy the plugin's settings schema (oneOf)"),
        ("pattern", "must match the pattern ^a"),
        ("ratio", "must be > 0"),
        ("rules[0].when", "expected a string, got int"),
        ("rules[1].what", "unknown setting for acme-hook (it takes to, when)"),
        ("rules[1].when", "required"),
        ("rules[11].when", "expected a string, got int"),
        ("tags", "must list at least 1 item(s)"),
        ("token", "must be at most 8 characters"),
        ("uniq", "must not list an item twice"),
        ("url", "must not be empty"),
    ]


def test_the_top_level_required_key_and_a_good_instance_give_nothing() -> None:
    assert schema_faults(SCHEMA, {}, "acme-hook") == []          # "required by <plugin>" is egress.settings_faults'
    assert schema_faults(json.dumps(SCHEMA), {"url": "u", "tags": ["abc", "defg"], "extra": {"x-n": 1}}, "a") == []
    assert schema_faults(SCHEMA, {"url": "u", "tags": ["a", "b", "c"]}, "a") == [
        ("tags", "must list at most 2 item(s)"), ("tags[0]", "must be at least 3 characters"),
        ("tags[1]", "must be at least 3 characters"), ("tags[2]", "must be at least 3 characters")]


def test_an_integer_is_an_int_never_a_whole_float_nor_a_bool() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}}
    assert schema_faults(schema, {"n": 2000.0, "x": 1}, "a") == [("n", "expected an integer, got float")]
    assert schema_faults(schema, {"n": True, "x": 2.5}, "a") == [("n", "expected an integer, got bool")]
    assert schema_faults(schema, {"n": 2000, "x": 2000.0}, "a") == []


def test_a_text_that_must_not_be_blank() -> None:
    schema = {"type": "object", "properties": {"d": {"type": "string", "pattern": "\\S"}}}
    assert schema_faults(schema, {"d": " \t "}, "a") == [("d", "must not be blank")]
    assert schema_faults(schema, {"d": " x "}, "a") == []


def test_settings_that_are_not_a_map_and_schemas_that_judge_nothing() -> None:
    assert schema_faults(SCHEMA, ["url"], "a") == [("", "expected a map, got list")]
    assert schema_faults(None, {"anything": 1}, "a") == []
    assert schema_faults({"type": "no-such-type"}, {"x": 1}, "a") == []      # not JSON Schema: the plugin's to check
    assert schema_faults("{not json", {"x": 1}, "a") == []
