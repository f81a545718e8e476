"""busbar.server.asgi_io.run_cancellable: upstream work runs in the request's own task and is
cancelled there when the client disconnects (case C026), with no cancellation left pending."""
from __future__ import annotations

import asyncio

import pytest
from busbar.server.asgi_io import BodyReadTimeout, read_body, run_cancellable


class Client:
    """An ASGI ``receive`` whose ``http.disconnect`` arrives when ``leave()`` is called."""

    def __init__(self) -> None:
        self._gone = asyncio.Event()

    def leave(self) -> None:
        self._gone.set()

    async def receive(self) -> dict:
        await self._gone.wait()
        return {"type": "http.disconnect"}


async def test_result_of_the_work_is_returned() -> None:
    client = Client()

    async def work() -> str:
        await asyncio.sleep(0.01)
        return "reply"

    assert await run_cancellable(client.receive, work()) == "reply"
    assert asyncio.current_task().cancelling() == 0


async def test_disconnect_cancels_the_work_and_returns_none() -> None:
    client = Client()
    cleaned: list[str] = []

    async def work() -> str:
        try:
            await asyncio.sleep(10)
            return "never"
        finally:
            cleaned.append("permit released")

    asyncio.get_running_loop().call_later(0.05, client.leave)
    t0 = asyncio.get_running_loop().time()
    assert await run_cancellable(client.receive, work()) is None
    assert asyncio.get_running_loop().time() - t0 < 1
    assert cleaned == ["permit released"]
    assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0.01)          # no stray cancellation is delivered later


async def test_work_that_absorbs_the_cancellation_still_counts_as_gone() -> None:
    client = Client()

    async def stubborn() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "swallowed"
        return "never"

    asyncio.get_running_loop().call_later(0.02, client.leave)
    assert await run_cancellable(client.receive, stubborn()) is None
    assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0.01)


async def test_an_outside_cancellation_propagates() -> None:
    client = Client()

    async def work() -> None:
        await asyncio.sleep(10)

    task = asyncio.ensure_future(run_cancellable(client.receive, work()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_read_body_times_out_between_frames_with_408() -> None:
    async def silent() -> dict:
        await asyncio.sleep(10)
        return {}

    with pytest.raises(BodyReadTimeout) as exc:
        await read_body({"headers": []}, silent, 1024, 0.05)
    assert (exc.value.status, exc.value.message) == (
        408, "no request body data for 0.05s (limits.request_body_read_timeout_secs)")
