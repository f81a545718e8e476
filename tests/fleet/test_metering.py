"""Per-request metering (busbar.store.metering) through a real ``busbar`` on a SQLite store: the
(day, key, model, provider) row holds exactly the tokens the clients were told, a request count and
the billable ones; a request that reached no upstream adds nothing."""
from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import openai

from tests.fleet.conftest import ENV, fleet_yaml, read_store
from tests.support.gateway import BusbarProcess

MSG = [{"role": "user", "content": "count my tokens"}]


def test_each_request_adds_its_usage_to_the_days_metering_row(tmp_path: Path, mock, plugins_dir: Path,
                                                               store_config) -> None:
    module, settings = store_config("sqlite")
    gw = BusbarProcess(fleet_yaml(module, settings, mock.url, plugins_dir), tmp_path, env=ENV).start(timeout=60)
    day = datetime.now(UTC).date().isoformat()
    seen_in = seen_out = 0
    try:
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
        for _ in range(3):
            reply = client.chat.completions.create(model="gpt", messages=MSG)
            assert reply.usage is not None
            seen_in += reply.usage.prompt_tokens
            seen_out += reply.usage.completion_tokens
        chunks = list(client.chat.completions.create(model="gpt", messages=MSG, stream=True,
                                                     stream_options={"include_usage": True}))
        usage = chunks[-1].usage
        assert usage is not None
        seen_in += usage.prompt_tokens
        seen_out += usage.completion_tokens
        mock.script([{"match": {"model": "gpt"}, "times": 1,
                      "response": {"status": 400, "body": {"error": {"message": "bad", "type": "invalid_request_error"}}}}])
        assert httpx.post(gw.url + "/v1/chat/completions", json={"model": "gpt", "messages": MSG}).status_code == 400
        assert httpx.post(gw.url + "/v1/chat/completions",             # no such model: reaches no upstream
                          json={"model": "nope", "messages": MSG}).status_code == 404
        time.sleep(0.3)                                                # > 2 flush intervals (50 ms)
        rows = read_store(module, settings, "metering", day)
    finally:
        gw.stop()
    assert seen_in > 0 and seen_out > 0
    assert rows == [{"day": day, "key_id": "-", "model": "gpt", "provider": "oa", "input": seen_in,
                     "output": seen_out, "cache_read": 0, "cache_write": 0, "requests": 5, "billable_requests": 4,
                     "key_group_at_use": ""}]
