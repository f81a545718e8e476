"""proxy/success.py: what a 2xx must look like to pass as a success (issue 11 item 7)."""
from __future__ import annotations

import pytest
from busbar.proxy.success import json_verdict, stream_verdict

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize("protocol, body", [
    ("openai", b'{"id":"x","choices":[]}'),
    ("anthropic", b'{"type":"message","content":[]}'),
    ("bedrock-invoke", b'{"type":"message","content":[]}'),
    ("responses", b'{"object":"response","output":[],"error":null}'),
    ("gemini", b'{"candidates":[]}'),
    ("gemini", b'{"promptFeedback":{"blockReason":"SAFETY"}}'),
    ("bedrock", b'{"output":{"message":{}},"stopReason":"end_turn"}'),
    ("cohere", b'{"id":"x","message":{"role":"assistant"}}'),
])
def test_a_success_envelope_passes_and_is_parsed_once(protocol, body):
    doc, reason = json_verdict(protocol, 200, {"content-type": "application/json; charset=utf-8"}, body)
    assert reason is None and isinstance(doc, dict)


@pytest.mark.parametrize("headers, body, reason", [
    ({"content-type": "text/html"}, b"<html></html>", "HTTP 200 with content-type text/html, not JSON"),
    ({"content-type": "text/event-stream"}, b"data: {}\n\n", "HTTP 200 with content-type text/event-stream, not JSON"),
    (JSON, b"", "HTTP 200 with an empty body"),
    (JSON, b"  \n", "HTTP 200 with an empty body"),
    (JSON, b"{nope", "HTTP 200 with a body that is not valid JSON"),
    (JSON, b"[1]", "HTTP 200 with a JSON list, not an object"),
    (JSON, b'{"error":{"message":"x"}}', "HTTP 200 with an error body"),
    (JSON, b'{"type":"error","error":{"type":"api_error"}}', "HTTP 200 with an error body"),
    (JSON, b'{"id":"x"}', "HTTP 200 with a body that is not an answer of protocol openai (no choices list)"),
    ({}, b'{"id":"x"}', "HTTP 200 with a body that is not an answer of protocol openai (no choices list)"),
])
def test_a_bad_2xx_is_named(headers, body, reason):
    assert json_verdict("openai", 200, headers, body) == (None, reason)


def test_no_content_type_is_judged_by_the_body():
    assert json_verdict("openai", 200, {}, b'{"choices":[]}') == ({"choices": []}, None)


@pytest.mark.parametrize("ctype, reason", [
    ("text/event-stream", None),
    ("text/event-stream; charset=utf-8", None),
    ("application/vnd.amazon.eventstream", None),
    ("", None),
    ("application/json", "HTTP 200 with content-type application/json to a stream request"),
    ("text/html; charset=utf-8", "HTTP 200 with content-type text/html to a stream request"),
])
def test_stream_content_types(ctype, reason):
    assert stream_verdict(200, {"content-type": ctype} if ctype else {}) == reason


def test_cohere_error_body_is_not_its_success_envelope():
    """Cohere's error body is ``{"message": "…"}``: the envelope key must be an object."""
    assert json_verdict("cohere", 200, JSON, b'{"message":"You are using a Trial key"}') == (
        None, "HTTP 200 with a body that is not an answer of protocol cohere (no message object)")
