"""gwbench path knobs (/d, /c, /i) and client-disconnect events (the gateway cancelling upstream calls)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import httpx
from busbar_mock_provider.process import MockProcess

OAI: Any = {"authorization": "Bearer sk-test"}
ANT: Any = {"x-api-key": "sk-ant"}
CHAT: Any = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
CHAT_STREAM: Any = {**CHAT, "stream": True}
MSG_STREAM: Any = {
    "model": "c",
    "max_tokens": 999,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}


def test_delay_knob(mock: MockProcess) -> None:
    t0 = time.monotonic()
    r = mock.client.post("/d300/v1/chat/completions", headers=OAI, json=CHAT)
    assert r.status_code == 200 and time.monotonic() - t0 >= 0.3


def test_chunks_knob(mock: MockProcess) -> None:
    r = mock.client.post("/d0/c16/v1/chat/completions", headers=OAI, json=CHAT_STREAM)
    assert r.content.count(b'"delta":{"content":') == 16
    r = mock.client.post("/c3/v1/chat/completions", headers=OAI, json=CHAT)
    body = r.json()
    assert body["choices"][0]["message"]["content"] == "Hello from gpt-4o. You said: hi"
    assert body["usage"]["completion_tokens"] == 3
    r = mock.client.post("/x/c20/v1/messages", headers=ANT, json=MSG_STREAM)
    assert r.content.count(b'"type":"text_delta"') == 20


def test_interval_knob(mock: MockProcess) -> None:
    t0 = time.monotonic()
    r = mock.client.post("/c4/i50/v1/chat/completions", headers=OAI, json=CHAT_STREAM)
    assert r.content.count(b"data: ") == 7  # role, 4 pieces, finish, [DONE]
    assert time.monotonic() - t0 >= 6 * 0.05


def test_disconnect_while_waiting(mock: MockProcess) -> None:
    with httpx.Client(base_url=mock.url, timeout=0.4) as c, contextlib.suppress(httpx.ReadTimeout):
        c.post("/d20000/v1/chat/completions", headers=OAI, json=CHAT)
    events = mock.wait_for_events(1)
    assert len(events) == 1
    ev = events[0]
    assert ev["type"] == "client_disconnected" and ev["phase"] == "waiting"
    assert (
        ev["path"] == "/d20000/v1/chat/completions" and ev["protocol"] == "openai" and ev["model"] == "gpt-4o"
    )
    assert 350 <= ev["after_ms"] < 1900
    assert ev["frames_sent"] == 0


def test_disconnect_mid_stream(mock: MockProcess) -> None:
    with (
        httpx.Client(base_url=mock.url, timeout=5) as c,
        c.stream("POST", "/c100/i100/v1/messages", headers=ANT, json=MSG_STREAM) as r,
    ):
        seen = b""
        for part in r.iter_raw():
            seen += part
            if seen.count(b"event: ") >= 3:
                break
    events = mock.wait_for_events(1)
    assert len(events) == 1
    ev = events[0]
    assert ev["phase"] == "streaming" and ev["protocol"] == "anthropic"
    assert 3 <= ev["frames_sent"] <= 5
    assert ev["after_ms"] < 1500


def test_completed_requests_record_no_event(mock: MockProcess) -> None:
    mock.client.post("/i1/v1/chat/completions", headers=OAI, json=CHAT_STREAM)
    mock.client.post("/d1/v1/chat/completions", headers=OAI, json=CHAT)
    time.sleep(0.1)
    assert mock.events() == []
