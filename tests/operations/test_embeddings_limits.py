"""Non-chat operations are admitted and settled by groups like chat (docs/limits.md, docs/beyond-chat.md):
a group's request limit refuses the third embeddings call in the caller's envelope, before any
upstream call; a refused pool lookup never reaches the limiter."""
from __future__ import annotations

import openai
import pytest

from tests.operations.conftest import KEYS
from tests.support.groupkey import GroupKeyProcess

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  co: { protocol: cohere, base_url: MOCK, api_key: { env: T_COHERE_KEY } }
models:
  oa-embed: { provider: oa, upstream_model: text-embedding-3-small }
  co-rerank: { provider: co, upstream_model: rerank-v3.5 }
pools:
  emb: { members: [ { model: oa-embed } ] }
rate_card:
  oa-embed: { input_utok: 0.02 }
  co-rerank: { input_utok: 0.0 }
groups:
  g: { limits: [ { requests: 2, per: minute } ] }
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory, mock):
    proc = GroupKeyProcess(CONFIG.replace("MOCK", mock.url), tmp_path_factory.mktemp("gw"), "g", env=KEYS)
    yield proc.start()          # requests send a key bound to group g
    proc.stop()


def test_a_group_request_limit_counts_embeddings(gw, mock):
    with openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0) as oa:
        for _ in range(2):
            assert len(oa.embeddings.create(model="emb", input=["a", "b"]).data) == 2
        with pytest.raises(openai.RateLimitError) as e:
            oa.embeddings.create(model="emb", input=["a", "b"])
    assert e.value.body["message"] == "group 'g': requests per minute exceeded (limit 2)"
    assert len(mock.requests()) == 2
