"""``StreamResult``: results come in batches (those ready together); ``next`` takes them one
at a time, ``next_batch`` what is left of a batch or the next one; closing runs its
``on_close`` once."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest

from app.rpc.context import StreamResult


def _stream(*batches: list[str]) -> tuple[StreamResult, list[bool]]:
    closed: list[bool] = []

    async def results() -> AsyncGenerator[list[str], None]:
        for batch in batches:
            yield batch

    return StreamResult(results(), lambda: closed.append(True)), closed


async def test_next_takes_the_results_one_at_a_time_across_batches() -> None:
    stream, _ = _stream(["a", "b"], ["c"])
    assert [await stream.next() for _ in range(3)] == ["a", "b", "c"]
    with pytest.raises(StopAsyncIteration):
        await stream.next()


async def test_next_batch_gives_what_is_left_of_a_batch_then_the_next() -> None:
    stream, closed = _stream(["a", "b", "c"], ["d"])
    assert await stream.next() == "a"
    assert await stream.next_batch() == ["b", "c"]
    assert await stream.next_batch() == ["d"]
    with pytest.raises(StopAsyncIteration):
        await stream.next_batch()
    await stream.aclose()
    await stream.aclose()
    assert closed == [True]
