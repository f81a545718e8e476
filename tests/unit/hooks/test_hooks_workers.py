"""The bounded worker pool: results, saturation, abandoned jobs, both ways of waiting.

Source: docs/hooks.md#fail-safety (saturated); C035.
"""
from __future__ import annotations

import asyncio
import threading
import time

from busbar.hooks.workers import WorkerPool


def test_result_error_and_sync_wait():
    pool = WorkerPool("w")
    job = pool.submit(lambda: 42)
    assert job.wait_sync(2.0) and job.result == 42 and job.error is None
    assert job.t_start <= job.t_done

    def boom():
        raise ValueError("x")
    job = pool.submit(boom)
    assert job.wait_sync(2.0) and isinstance(job.error, ValueError)
    pool.close()


def test_saturation_is_bounded_and_abandoned_jobs_are_skipped():
    release = threading.Event()
    ran = []
    pool = WorkerPool("w", max_workers=2, max_pending=3, prestart=0)

    def hang(i):
        def fn():
            ran.append(i)
            release.wait(2)
            return i
        return fn
    jobs = [pool.submit(hang(i)) for i in range(2)]
    time.sleep(0.05)                              # both workers started and took a job
    jobs += [pool.submit(hang(i)) for i in range(2, 10)]
    assert [j is None for j in jobs] == [False] * 5 + [True] * 5     # 2 running + 3 queued, then saturated
    time.sleep(0.05)
    assert pool._threads == 2 and sorted(ran) == [0, 1]
    for j in jobs[2:5]:
        j.abandon()
    release.set()
    assert jobs[0].wait_sync(2) and jobs[1].wait_sync(2)
    time.sleep(0.05)
    assert sorted(ran) == [0, 1]                  # the abandoned ones never ran
    assert pool.submit(lambda: 1).wait_sync(2)
    pool.close()


async def test_future_is_resolved_from_the_worker():
    pool = WorkerPool("w")
    loop = asyncio.get_running_loop()
    job = pool.submit(lambda: time.sleep(0.05) or "done")
    await asyncio.wait_for(job.future(loop), 2)
    assert job.result == "done"
    job2 = pool.submit(lambda: "fast")
    job2.wait_sync(2)
    await asyncio.wait_for(job2.future(loop), 1)    # already finished: resolved at once
    pool.close()
