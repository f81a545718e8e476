"""Embeddings through Busbar vs direct to the mock, same run: the added latency of a 16-input batch.

Runs a real mock provider and a real busbar on loopback. Sequential requests (concurrency 1),
interleaved (direct, via busbar, direct, ...) so load drift hits both series alike, after a warm-up.
Cells, each a 16-text batch:

- ``same 8d``: OpenAI client -> OpenAI lane, ``encoding_format: base64`` (the official SDK's
  default), 8 dimensions: the pass-through floor;
- ``same 1536d``: the same at 1536 dimensions (text-embedding-3-small's size);
- ``cross 1536d``: OpenAI client -> Cohere lane (``/v2/embed``), 1536 dimensions: read the Cohere
  answer, rebuild base64 vectors for the OpenAI client. Its direct reference is the same Cohere body
  sent straight to the mock.

added = p50(via busbar) - p50(direct), and the same for p99.
Usage: .venv/bin/python bench/bench_embeddings.py [--n 300]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from busbar_mock_provider.process import MockProcess

from tests.support.gateway import BusbarProcess

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  co: { protocol: cohere, base_url: MOCK, api_key: { env: T_COHERE_KEY } }
models:
  oa-embed: { provider: oa, upstream_model: text-embedding-3-small }
  co-embed: { provider: co, upstream_model: embed-english-v3.0 }
pools:
  emb-openai: { members: [ { model: oa-embed } ] }
  emb-cohere: { members: [ { model: co-embed } ] }
"""
TEXTS = [f"document number {i}: a paragraph of retrieval text about gateways and pools" for i in range(16)]


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] * 1000 if q < 100 else max(xs) * 1000


def _cells(dims_small: int, dims: int) -> list[tuple[str, str, dict[str, Any], str, dict[str, Any]]]:
    """(name, busbar pool, client body, direct path, direct body)."""
    def oa(model: str, d: int) -> dict[str, Any]:
        return {"model": model, "input": TEXTS, "encoding_format": "base64", "dimensions": d}
    co = {"model": "embed-english-v3.0", "texts": TEXTS, "input_type": "search_document",
          "embedding_types": ["float"], "output_dimension": dims}
    return [
        (f"same {dims_small}d", "emb-openai", oa("emb-openai", dims_small), "/v1/embeddings",
         oa("text-embedding-3-small", dims_small)),
        (f"same {dims}d", "emb-openai", oa("emb-openai", dims), "/v1/embeddings", oa("text-embedding-3-small", dims)),
        (f"cross {dims}d", "emb-cohere", oa("emb-cohere", dims), "/v2/embed", co),
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--dims", type=int, default=1536)
    a = ap.parse_args()
    auth = {"authorization": "Bearer x"}
    with MockProcess() as mock, tempfile.TemporaryDirectory() as tmp:
        env = {"T_OPENAI_KEY": "sk-x", "T_COHERE_KEY": "co-x", "BUSBAR_STATE_FILE": ""}
        with BusbarProcess(CONFIG.replace("MOCK", mock.url), Path(tmp), env=env) as gw, \
                httpx.Client(timeout=20) as c:
            print(f"embeddings, 16-input batch, concurrency 1, n={a.n} per series (interleaved)")
            print("| cell | direct p50 ms | busbar p50 ms | **added p50 ms** | direct p99 ms | busbar p99 ms "
                  "| added p99 ms |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for name, _pool, body, path, direct_body in _cells(8, a.dims):
                for _ in range(30):      # warm-up (connections, caches)
                    c.post(gw.url + "/v1/embeddings", json=body)
                    c.post(mock.url + path, json=direct_body, headers=auth)
                mock.clear()             # the mock's request log would grow with every request
                via: list[float] = []
                direct: list[float] = []
                for i in range(a.n):
                    t = time.perf_counter()
                    r = c.post(gw.url + "/v1/embeddings", json=body)
                    via.append(time.perf_counter() - t)
                    assert r.status_code == 200 and len(r.json()["data"]) == 16, r.text[:200]
                    t = time.perf_counter()
                    r = c.post(mock.url + path, json=direct_body, headers=auth)
                    direct.append(time.perf_counter() - t)
                    assert r.status_code == 200
                    if i % 100 == 99:
                        mock.clear()
                p50d, p50v = _pct(direct, 50), _pct(via, 50)
                p99d, p99v = _pct(direct, 99), _pct(via, 99)
                print(f"| {name} | {p50d:.2f} | {p50v:.2f} | **{p50v - p50d:.2f}** | {p99d:.2f} | {p99v:.2f} "
                      f"| {p99v - p99d:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
