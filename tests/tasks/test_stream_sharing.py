"""The streams of one process that follow a task share its reads and its events' encoding
(``SharedReads``, ``app.tasks.stream_wire``), and a stream sends the updates of one read in
one write: each still gets every event in order."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from app.tasks import states, stream_wire
from app.testing.edge import edge_harness
from tests.polling import poll_until
from tests.tasks.conftest import send_params
from tests.tasks.sse_client import SseCall

STREAMS = 4
STEPS = 4


def _texts(results: list[dict[str, Any]]) -> list[str]:
    return [
        r["statusUpdate"]["status"]["message"]["parts"][0]["text"]
        for r in results
        if "statusUpdate" in r and "message" in r["statusUpdate"]["status"]
    ]


@pytest.mark.postgres
async def test_the_streams_of_a_task_share_each_read_and_each_encoding(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
):
    encoded = 0
    text = stream_wire._text

    def counted_text(message: Any) -> Any:
        nonlocal encoded
        encoded += 1
        return text(message)

    monkeypatch.setattr(stream_wire, "_text", counted_text)
    async with edge_harness(pg_url, background=True, poll_seconds=30) as edge:
        await edge.add_tenant("open", agent="scripted", require_push_config=False)
        edge.default_tenant = "open"
        store = edge.services.db.storage.task_events
        reads = 0
        after = store.after

        async def counted_after(*args: Any, **kwargs: Any) -> Any:
            nonlocal reads
            reads += 1
            return await after(*args, **kwargs)

        store.after = counted_after  # type: ignore[method-assign]
        # Steps apart in time, so each notification's reads are over before the next.
        steps = "".join(f"progress p{i}\nsleep 0.3\n" for i in range(STEPS))
        script = f"sleep 1\n{steps}reply done"
        params = send_params("m-1", script, push=None, returnImmediately=True)
        task_id = (await edge.result("SendMessage", params))["task"]["id"]
        async with contextlib.AsyncExitStack() as opened:
            calls = [
                await opened.enter_async_context(SseCall(edge, "SubscribeToTask", {"id": task_id}))
                for _ in range(STREAMS)
            ]
            results = await asyncio.gather(*(call.events(timeout=20) for call in calls))
    updates = STEPS + 1
    for got in results:
        assert got[0]["task"]["id"] == task_id
        assert got[-1]["statusUpdate"]["status"]["state"] == states.COMPLETED
        assert _texts(got) == [*(f"p{i}" for i in range(STEPS)), "done"]
    # Alone, every stream would read and encode every update: STREAMS x updates of each.
    assert encoded <= updates + 2, encoded
    assert reads <= 2 * (updates + 2), reads


async def test_a_stream_that_fell_behind_sends_what_it_read_in_one_write(db_url: str):
    """The updates of one read go out in one body (an SSE write), in order: a stream held back
    while the whole turn ran catches up in one write, not one per event."""
    async with edge_harness(db_url, background=True, stream_poll_seconds=0.05) as edge:
        await edge.add_tenant("open", agent="scripted", require_push_config=False)
        edge.default_tenant = "open"
        store = edge.services.db.storage.task_events
        after = store.after
        held = asyncio.Event()

        async def held_after(*args: Any, **kwargs: Any) -> Any:
            await held.wait()
            return await after(*args, **kwargs)

        store.after = held_after  # type: ignore[method-assign]
        steps = "".join(f"progress p{i}\n" for i in range(STEPS))
        params = send_params("m-1", f"sleep 0.5\n{steps}reply done", push=None)
        params["configuration"] = {"returnImmediately": True}
        task_id = (await edge.result("SendMessage", params))["task"]["id"]
        async with SseCall(edge, "SubscribeToTask", {"id": task_id}) as call:
            assert (await call.event())["result"]["task"]["id"] == task_id

            async def completed() -> bool | None:
                got = await edge.result("GetTask", {"id": task_id})
                return True if got["status"]["state"] == states.COMPLETED else None

            await poll_until(completed, 10, interval=0.02, what="completed")
            held.set()
            results = await call.events()
            bodies = call.bodies
    assert _texts(results) == [*(f"p{i}" for i in range(STEPS)), "done"]
    # The Task, every update in one write, the empty body that ends the response.
    assert bodies == 3, bodies
