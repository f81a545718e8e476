"""The access log through a real busbar (docs/operations.md#the-access-log): one ``busbar.access`` line
per request, as JSON with ``--log-format json`` and as a readable line otherwise, with the lane that
served, the failover hops, the timings and the tokens; nothing at ``--log-level warn``."""
from __future__ import annotations

import json

import openai
import pytest

from tests.support.waiting import wait_until

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  al-a: { provider: up-openai }
  al-b: { provider: up-openai }
pools:
  logged:
    members: [ { model: al-a, weight: 1000 }, { model: al-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 50 } }
"""
ERR_500 = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}


def _access(gw) -> list[dict]:
    return [json.loads(line) for line in gw.logs().splitlines()
            if line.startswith("{") and json.loads(line)["logger"] == "busbar.access"]


@pytest.fixture(scope="module")
def json_gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url, env={"BUSBAR_LOG": "info", "BUSBAR_LOG_FORMAT": "json"})


def test_one_json_line_per_request_with_lane_hops_timings_and_tokens(json_gw, mock):
    client = openai.OpenAI(base_url=json_gw.url + "/v1", api_key="x", max_retries=0)
    mock.script([{"match": {"model": "al-a"}, "times": 1, "response": {"status": 500, "body": ERR_500}}])
    r = client.chat.completions.with_raw_response.create(
        model="logged", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-request-id": "rq-7"})
    usage = r.parse().usage
    (line,) = wait_until(lambda: [a for a in _access(json_gw) if a["client_request_id"] == "rq-7"], what="line")
    assert {k: line[k] for k in ("level", "msg", "ingress", "method", "path", "model", "pool", "lane", "status",
                                 "outcome", "hops", "input_tokens", "output_tokens", "principal", "stream")} == {
        "level": "info", "msg": "access", "ingress": "openai", "method": "POST", "path": "/v1/chat/completions",
        "model": "logged", "pool": "logged", "lane": "al-b", "status": 200, "outcome": "ok", "hops": 1,
        "input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens, "principal": None,
        "stream": False}
    assert 0 < line["ttfb_ms"] <= line["latency_ms"] < 10_000
    assert line["request_id"] and line["request_id"] != "rq-7"
    assert line["ts"].endswith("+00:00")


def test_a_stream_is_logged_when_it_ends_and_a_404_is_logged_too(json_gw, mock):
    client = openai.OpenAI(base_url=json_gw.url + "/v1", api_key="x", max_retries=0)
    chunks = list(client.chat.completions.create(model="al-a", messages=[{"role": "user", "content": "hi"}],
                                                 stream=True, stream_options={"include_usage": True},
                                                 extra_headers={"x-request-id": "rq-stream"}))
    usage = next(c.usage for c in chunks if c.usage is not None)
    (line,) = wait_until(lambda: [a for a in _access(json_gw) if a["client_request_id"] == "rq-stream"],
                         what="stream line")
    assert (line["stream"], line["status"], line["outcome"], line["pool"], line["lane"], line["output_tokens"]) == (
        True, 200, "ok", None, "al-a", usage.completion_tokens)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}],
                                       extra_headers={"x-request-id": "rq-404"})
    (miss,) = wait_until(lambda: [a for a in _access(json_gw) if a["model"] == "nope"], what="404")
    assert (miss["status"], miss["outcome"], miss["lane"], miss["hops"], miss["model"]) == (
        404, "client_error", None, 0, "nope")


def test_text_lines_are_readable_and_warn_turns_the_access_log_off(gateway_factory, mock):
    text = gateway_factory(CONFIG, mock.url, env={"BUSBAR_LOG": "info"})
    quiet = gateway_factory(CONFIG, mock.url, env={"BUSBAR_LOG": "warn"})
    for gw in (text, quiet):
        openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            model="al-b", messages=[{"role": "user", "content": "hi"}])
    line = wait_until(lambda: [ln for ln in text.logs().splitlines() if " busbar.access: " in ln], what="line")[0]
    body = line.split(" busbar.access: ", 1)[1]
    assert body.startswith("access 200 ok openai model=al-b pool=- lane=al-b hops=0 ttfb_ms=")
    assert " principal=- id=" in body
    assert "busbar.access" not in quiet.logs()
