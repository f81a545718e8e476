"""Body-shape faults of the mock: stall after the headers, trickle, generated huge bodies, gzip."""

from __future__ import annotations

import gzip
import time
from typing import Any

import httpx
import pytest
from busbar_mock_provider.process import MockProcess

OAI: Any = {"authorization": "Bearer sk-test"}
CHAT: Any = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def test_stall_after_headers_sends_the_head_then_silence(mock: MockProcess) -> None:
    mock.script([{"response": {"stall_after": 0}}])
    with (
        httpx.Client(base_url=mock.url, timeout=httpx.Timeout(5, read=0.5)) as c,
        c.stream("POST", "/v1/chat/completions", headers=OAI, json=CHAT) as r,
    ):
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        assert int(r.headers["content-length"]) > 0
        with pytest.raises(httpx.ReadTimeout):
            r.read()
    events = mock.wait_for_events(1, 5)
    assert [(e["type"], e["phase"]) for e in events] == [("client_disconnected", "stall")]


def test_stall_after_n_frames_of_a_stream(mock: MockProcess) -> None:
    mock.script([{"response": {"stall_after": 2}}])
    got = b""
    with (
        httpx.Client(base_url=mock.url, timeout=httpx.Timeout(5, read=0.5)) as c,
        c.stream("POST", "/v1/chat/completions", headers=OAI, json={**CHAT, "stream": True}) as r,
        pytest.raises(httpx.ReadTimeout),
    ):
        for part in r.iter_raw():
            got += part
    assert got.count(b"data: ") == 2
    assert b"[DONE]" not in got


def test_trickle_writes_one_byte_at_a_time(mock: MockProcess) -> None:
    mock.script([{"response": {"body": {"ok": 1}, "trickle_ms": 20}}])
    t0 = time.monotonic()
    r = mock.client.post("/v1/chat/completions", headers=OAI, json=CHAT)
    assert (r.status_code, r.content) == (200, b'{"ok":1}')
    assert time.monotonic() - t0 >= 8 * 0.02


def test_body_bytes_gzip_is_a_small_answer_that_inflates(mock: MockProcess) -> None:
    size = 8 << 20
    mock.script([{"response": {"body_bytes": size, "gzip": True}}])
    with (
        httpx.Client(base_url=mock.url, timeout=10) as c,
        c.stream("POST", "/v1/chat/completions", headers=OAI, json=CHAT) as r,
    ):
        assert r.headers["content-encoding"] == "gzip"
        assert "content-length" not in r.headers
        raw = b"".join(r.iter_raw())
    assert len(raw) < size // 500
    body = gzip.decompress(raw)
    assert len(body) == size
    assert body.startswith(b'{"pad":"aaa') and body.endswith(b'aaa"}')


def test_body_bytes_plain(mock: MockProcess) -> None:
    mock.script([{"response": {"body_bytes": 1000, "status": 201}}])
    r = mock.client.post("/v1/chat/completions", headers=OAI, json=CHAT)
    assert (r.status_code, len(r.content), r.json()["pad"]) == (201, 1000, "a" * 990)


def test_gzip_of_a_scripted_body_keeps_its_length(mock: MockProcess) -> None:
    mock.script([{"response": {"body": {"ok": True}, "gzip": True}}])
    r = mock.client.post("/v1/chat/completions", headers=OAI, json=CHAT)
    assert r.headers["content-encoding"] == "gzip"
    assert r.json() == {"ok": True}


def test_shape_keys_are_validated(mock: MockProcess) -> None:
    rules = [{"response": {"body": {}, "body_bytes": 10, "stall_after": 1, "drop_after": 2, "gzip": 1,
                           "trickle_ms": -1}}]
    r = mock.client.post("/_mock/script", json={"rules": rules})
    assert r.status_code == 400
    assert r.json()["faults"] == [
        "rules[0].response.trickle_ms: -1 is not a number of milliseconds in 0..3600000",
        "rules[0].response.gzip: 1 is not a boolean",
        "rules[0].response.body_bytes: 10 is not a byte count in 16..17179869184",
        "rules[0].response: body and body_bytes are exclusive; keep one",
        "rules[0].response: drop_after and stall_after are exclusive; keep one",
    ]
