"""Gemini snake_case -> camelCase normalisation (issue 11 item 24): exact outputs, the opaque
values kept as sent, the both-spellings refusal, and the countTokens form."""
from __future__ import annotations

import pytest
from busbar.proto.errors import BadRequest
from busbar.proto.gemini import DIALECT
from busbar.proto.gemini.casing import camel, count_tokens_request, normalize


def test_camel():
    assert [camel(n) for n in ("max_output_tokens", "inline_data", "mimeType", "x", "a__b")] == \
        ["maxOutputTokens", "inlineData", "mimeType", "x", "aB"]


def test_every_api_field_is_camel_cased_and_data_is_kept():
    body = {"contents": [{"role": "model", "parts": [
                {"function_call": {"name": "f", "args": {"snake_arg": 1}}, "thought_signature": "c2ln"},
                {"file_data": {"mime_type": "application/pdf", "file_uri": "gs://b/x"}}]},
                         {"role": "user", "parts": [{"function_response": {"name": "f",
                                                                           "response": {"out_put": 2}}}]}],
            "tools": [{"function_declarations": [{"name": "f", "parameters": {"properties": {"my_field": {}}},
                                                  "parameters_json_schema": {"x_y": 1}}]}],
            "generation_config": {"thinking_config": {"thinking_budget": 8, "include_thoughts": True},
                                  "response_schema": {"property_ordering": ["a"]}, "response_mime_type": "x"},
            "labels": {"team_name": "a"}, "safety_settings": [{"category": "C", "threshold": "T"}],
            "cached_content": "cachedContents/abc"}
    assert normalize(body) == {
        "contents": [{"role": "model", "parts": [
            {"functionCall": {"name": "f", "args": {"snake_arg": 1}}, "thoughtSignature": "c2ln"},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/x"}}]},
                     {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"out_put": 2}}}]}],
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"properties": {"my_field": {}}},
                                             "parametersJsonSchema": {"x_y": 1}}]}],
        "generationConfig": {"thinkingConfig": {"thinkingBudget": 8, "includeThoughts": True},
                             "responseSchema": {"property_ordering": ["a"]}, "responseMimeType": "x"},
        "labels": {"team_name": "a"}, "safetySettings": [{"category": "C", "threshold": "T"}],
        "cachedContent": "cachedContents/abc"}


def test_a_camel_case_body_is_returned_as_the_same_object():
    body = {"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 3}}
    assert normalize(body) is body
    assert DIALECT.normalize_request(body) is body


@pytest.mark.parametrize(("body", "message"), [
    ({"systemInstruction": {}, "system_instruction": {}},
     'systemInstruction: set twice, as "system_instruction" and "systemInstruction"; send one spelling'),
    ({"contents": [{"parts": [{"inlineData": {"mimeType": "a", "mime_type": "b"}}]}]},
     'contents[0].parts[0].inlineData.mimeType: set twice, as "mime_type" and "mimeType"; send one spelling'),
    ({"tool_config": {"function_calling_config": {}, "functionCallingConfig": {}}},
     'toolConfig.functionCallingConfig: set twice, as "function_calling_config" and "functionCallingConfig"; '
     "send one spelling"),
])
def test_both_spellings_are_refused_naming_the_field(body, message):
    with pytest.raises(BadRequest) as e:
        normalize(body)
    assert e.value.message == message


def test_count_tokens_form():
    contents = [{"parts": [{"text": "hi"}]}]
    assert DIALECT.normalize_request({"contents": contents}, "countTokens") == \
        {"generateContentRequest": {"contents": contents}}
    assert count_tokens_request({"generateContentRequest": {"contents": contents}, "x": 1}) == \
        {"generateContentRequest": {"contents": contents}}
    with pytest.raises(BadRequest) as e:
        count_tokens_request({})
    assert e.value.message == ('countTokens: give "contents" (or "generateContentRequest"), e.g. '
                               '{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}')


def test_count_tokens_egress_url_and_model():
    class P:
        base_url, path_base, api_key, extra_headers = "https://g.example", None, "k", None
    url, headers, body = DIALECT.egress_request(P(), "gemini-2.5-flash", False,
                                                b'{"generateContentRequest":{"contents":[]}}', None)
    assert url == "https://g.example/v1beta/models/gemini-2.5-flash:countTokens"
    assert body == b'{"generateContentRequest":{"contents":[],"model":"models/gemini-2.5-flash"}}'
    assert headers["x-goog-api-key"] == "k"
