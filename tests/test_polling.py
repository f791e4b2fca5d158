"""``tests.polling.poll_until``: the one way tests wait for a condition."""

from __future__ import annotations

import pytest

from tests.polling import poll_until


async def test_returns_the_first_truthy_value_of_a_sync_or_async_predicate() -> None:
    calls: list[int] = []

    def sync() -> int | None:
        calls.append(1)
        return len(calls) if len(calls) >= 3 else None

    assert await poll_until(sync, 5, interval=0.001) == 3

    async def ready() -> str:
        return "yes"

    assert await poll_until(ready, 5) == "yes"


async def test_fails_after_the_timeout_naming_what_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"the row not met within 0.05 s \(last: \[\]\)"):
        await poll_until(lambda: [], 0.05, interval=0.01, what="the row")


async def test_check_fails_at_once() -> None:
    def died() -> None:
        raise RuntimeError("worker exited")

    with pytest.raises(RuntimeError, match="worker exited"):
        await poll_until(lambda: None, 30, check=died)
