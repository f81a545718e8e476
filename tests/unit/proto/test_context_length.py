"""The context-length wording table (issue 11 item 23): one test per known wording, and the 400s
that must not be taken for one."""
from __future__ import annotations

import pytest
from busbar.proto.base import UpstreamErrorInfo
from busbar.proto.context_length import WORDINGS, matching, says_context_length
from busbar.proxy.disposition import classify


@pytest.mark.parametrize("wording", WORDINGS, ids=[w.source for w in WORDINGS])
def test_each_wording_recognises_its_own_example(wording):
    assert wording in matching(wording.example)
    assert says_context_length(None, None, wording.example) is True
    assert classify(400, UpstreamErrorInfo(None, wording.example), {}) == "context_length"
    assert classify(413, UpstreamErrorInfo(None, wording.example.upper()), {}) == "context_length"


def test_the_anthropic_input_plus_max_tokens_wording_of_issue_11():
    info = UpstreamErrorInfo("invalid_request_error",
                             "input length and `max_tokens` exceed context limit: 8000 + 1024 > 8192, "
                             "decrease input length or `max_tokens` and try again", "invalid_request_error")
    assert [w.source for w in matching(info.message)] == ["Anthropic (input plus max_tokens)"]
    assert classify(400, info, {}) == "context_length"
    assert classify(503, info, {}) == "server_error"        # never on a 5xx


def test_the_code_alone_is_enough():
    assert classify(400, UpstreamErrorInfo("context_length_exceeded", "Please reduce the length."), {}) \
        == "context_length"


@pytest.mark.parametrize("message", [
    "max_tokens is too large: 100000. This model supports at most 4096 completion tokens.",
    "Invalid 'messages[0].content': string too long.",
    "messages: roles must alternate between \"user\" and \"assistant\"",
    "The model `gpt-9` does not exist or you do not have access to it.",
    "Request too large for gpt-4 in organization org-x on tokens per min (TPM): Limit 10000, Requested 12000.",
    "API key not valid. Please pass a valid API key.",
])
def test_other_400s_are_client_errors(message):
    assert says_context_length(None, "invalid_request_error", message) is False
    assert classify(400, UpstreamErrorInfo(None, message, "invalid_request_error"), {}) == "client_error"
