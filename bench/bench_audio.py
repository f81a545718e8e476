"""A 20 MB transcription upload through Busbar: the peak RSS it adds to the busbar process.

Runs a real mock provider and a real busbar on loopback. Each sample is a FRESH busbar process
(the high-water mark only grows): warm-up with a small upload (imports, connection pool, first-use
allocations), read ``VmHWM`` from ``/proc/<pid>/status``, send one upload of ``--mb`` MB, read
``VmHWM`` again. added = after - before. Its reference, measured in the same run, is the upload's
own size: ``added / size`` near 1 means the body is held once (read into one buffer, forwarded from
it), near 2 that it is held twice.

Cells:

- ``same name``: the client names the wire model (``whisper-1``): the received bytes go upstream as-is;
- ``re-framed``: the client names a pool: the ``model`` part is re-framed, the file sent as a view
  of the received bytes (``busbar.proto.ops.audio.reframe``);
- ``Gemini lane``: the pool's member is a Gemini model: the file goes base64-encoded inside a
  ``:generateContent`` JSON body, encoded chunk by chunk from views of the received bytes
  (``busbar.proto.ops.audio_gemini.GeminiUploadBody``); holding the encoding whole would add 4/3 of
  the upload on top.

Usage: .venv/bin/python bench/bench_audio.py [--mb 20] [--runs 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from busbar_mock_provider.process import MockProcess

from tests.support.gateway import BusbarProcess

CONFIG = """
listen: "127.0.0.1:{port}"
limits: { request_body_max_bytes: 67108864 }
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  gm: { protocol: gemini, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  whisper-1: { provider: oa }
  gem: { provider: gm, upstream_model: gemini-2.0-flash, operations: [audio] }
pools:
  stt: { members: [ { model: whisper-1 } ] }
  gem-stt: { members: [ { model: gem } ] }
"""


def _hwm_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def _busbar_pid(root: int) -> int:
    """The serving process: ``root`` or, when it forked, its one child."""
    kids = Path(f"/proc/{root}/task/{root}/children").read_text().split()
    return int(kids[0]) if len(kids) == 1 else root


def _upload(c: httpx.Client, url: str, model: str, data: bytes) -> None:
    r = c.post(url + "/v1/audio/transcriptions", data={"model": model, "response_format": "verbose_json"},
               files={"file": ("speech.wav", data, "audio/wav")})
    assert r.status_code == 200, r.text[:300]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    size = a.mb * 1024 * 1024
    payload = bytes(range(256)) * (size // 256)
    print(f"transcription upload of {a.mb} MB ({size} bytes), one fresh busbar process per sample, "
          f"runs={a.runs}")
    print("| cell | added VmHWM MB (each run) | **median added MB** | **added / upload size** |")
    print("|---|---|---:|---:|")
    with MockProcess() as mock, tempfile.TemporaryDirectory() as tmp, httpx.Client(timeout=120) as c:
        for cell, model in (("same name", "whisper-1"), ("re-framed", "stt"), ("Gemini lane", "gem-stt")):
            added: list[float] = []
            for i in range(a.runs):
                env = {"T_OPENAI_KEY": "sk-x", "BUSBAR_STATE_FILE": ""}
                d = Path(tmp) / f"{cell.replace(' ', '-')}-{i}"
                d.mkdir()
                with BusbarProcess(CONFIG.replace("MOCK", mock.url), d, env=env) as gw:
                    pid = _busbar_pid(gw.proc.pid)
                    for _ in range(3):
                        _upload(c, gw.url, model, payload[:65536])
                    before = _hwm_kb(pid)
                    _upload(c, gw.url, model, payload)
                    after = _hwm_kb(pid)
                mock.clear()
                added.append((after - before) / 1024)
            med = statistics.median(added)
            runs = ", ".join(f"{x:.1f}" for x in added)
            print(f"| {cell} | {runs} | **{med:.1f}** | **{med / (size / 2**20):.2f}** |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
