"""Instructions per request that group admission adds (issue 14), counted by callgrind: robust on a
shared machine, where wall-clock percentiles move with the neighbours' load.

Driven by ``bench/limits_ir.sh`` (which runs this under ``valgrind --tool=callgrind`` and switches
counting on and dumps between phases); not meant to run alone. The same two gateways as
``bench/bench_limits.py`` (the keys chain on both; ``plain`` has no groups, ``limited`` charges a
3-level chain with 4 limits). Time-driven loops (store flusher, key sync, the limits' drain) are
stopped and run every 400 requests instead (what their 100 ms period does at ~250 us per request),
so valgrind's slowdown does not inflate them; the GC's generations are frozen after warm-up. Phases:
plain, limited, plain, limited, ``N`` requests each. It imports busbar from ``PYTHONPATH``, so it
also runs against an older tree.
"""
from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_auth import keyed_gateway
from bench_hooks import post_asgi
from bench_limits import BODY, CONFIG, GROUPS, _upstream
from busbar.server.app import AppState, create_app
from busbar.store.metering import metering_finisher


def _wait(d: Path, tag: int) -> None:
    (d / f"ready{tag}").touch()
    while not (d / f"go{tag}").exists():
        time.sleep(0.05)


async def _run(app: Any, headers: list[tuple[bytes, bytes]], gw: Any, n: int) -> None:
    for i in range(n):
        await post_asgi(app, BODY, headers)
        if i % 400 == 399:                  # what the 100 ms loops do at ~250 us per request
            gw.limiter.limiter.drain()
            if gw.flusher is not None:
                await gw.flusher.flush()


async def _main(d: Path, n: int) -> None:
    apps = {}
    for name, text, group in (("plain", CONFIG, None), ("limited", CONFIG + GROUPS, "leaf")):
        gw, token, tasks = await keyed_gateway(text, {"K": "x"}, Path(tempfile.mkdtemp()),
                                               httpx.MockTransport(_upstream), group)
        await gw.limiter.start(gw)
        for t in tasks:
            t.cancel()
        if gw.limiter._drainer is not None:
            gw.limiter._drainer.cancel()
        state = AppState(gateway=gw)
        state.finishers.append(metering_finisher(gw))
        apps[name] = (create_app(state), [(b"authorization", b"Bearer " + token.encode())], gw)
    for app, headers, gw in apps.values():
        await _run(app, headers, gw, 800)
    gc.collect()
    gc.freeze()
    tag = 1
    for _ in range(2):
        for name in ("plain", "limited"):
            app, headers, gw = apps[name]
            _wait(d, tag)
            tag += 1
            await _run(app, headers, gw, n)
    _wait(d, tag)


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1]), int(sys.argv[2])))
