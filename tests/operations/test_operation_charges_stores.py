"""Operation units on the durable stores (docs/limits.md#operation-units): the ``<model>#<unit>``
ledger entries and metering rows round-trip through postgres and valkey. A gateway spends 80 000 µ
on two images, is restarted on the same store, and the new node's budget holds what the ledger
says: one more image (40 000 µ) does not fit 100 000 µ and is refused before any upstream call; the
day report still shows the images and their spend."""
from __future__ import annotations

import json

import openai
import pytest

from tests.fleet.conftest import plugins_dir, store_config  # noqa: F401 - fixtures
from tests.operations.test_operation_charges import Gw, _used
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize("backend", ["postgres", "valkey"])
def test_units_survive_a_restart_on_the_store(backend, mock, store_config, plugins_dir, tmp_path):  # noqa: F811
    module, settings = store_config(backend)
    store_yaml = (f"plugins: {{ enabled: true, dir: {plugins_dir} }}\n"
                  f"store: {{ module: {module}, settings: {json.dumps(settings)} }}")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Gw(tmp_path / "a", mock.url, store_yaml).start()
    try:
        key_id, token = first.mint("tight")
        with openai.OpenAI(base_url=first.url + "/v1", api_key=token, max_retries=0) as oa:
            assert len(oa.images.generate(model="imgs", prompt="a red fox", n=2).data) == 2
        assert _used(first, "tight") == (80000, 0)
        wait_until(lambda: first.admin.get(f"/keys/{key_id}/usage").json()["images"] == 2, what="flushed")
    finally:
        first.stop()
    again = Gw(tmp_path / "b", mock.url, store_yaml).start()
    try:
        assert _used(again, "tight") == (80000, 0)                 # seeded from the ledger's unit entries
        mock.clear()
        with (openai.OpenAI(base_url=again.url + "/v1", api_key=token, max_retries=0) as oa,
              pytest.raises(openai.RateLimitError) as e):
            oa.images.generate(model="imgs", prompt="a red fox", n=1)
        assert e.value.body["code"] == "insufficient_quota"
        assert mock.requests() == []
        img = next(m for m in again.admin.get("/usage").json()["by_model"] if m["model"] == "img")
        assert (img["images"], img["spend_micros"], img["requests"], img["input"]) == (2, 80000, 1, 0)
    finally:
        again.stop()
