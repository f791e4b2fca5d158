"""The lease keeper's own thread: it stops when asked, without waiting out its sleep."""

from __future__ import annotations

import asyncio

from app.worker.keeper import LeaseKeeper


async def test_stop_ends_the_keepers_sleep_instead_of_waiting_for_its_tick(db_url: str) -> None:
    # A tick of a minute (min(poll_seconds, lease_seconds / 3)): a stop that waited for the
    # sleep to end would hold a worker's shutdown (and uvicorn's) for that long.
    keeper = LeaseKeeper(db_url, lease_seconds=180.0, poll_seconds=60.0)
    keeper.start()
    await asyncio.sleep(0.5)  # the thread is in its first sleep by now
    await asyncio.wait_for(keeper.stop(), timeout=10)


async def test_a_stopped_keeper_starts_again_and_stops_again(db_url: str) -> None:
    keeper = LeaseKeeper(db_url, lease_seconds=180.0, poll_seconds=60.0)
    for _ in range(2):
        keeper.start()
        await asyncio.sleep(0.2)
        await asyncio.wait_for(keeper.stop(), timeout=10)


async def test_a_stop_right_after_start_is_not_lost(db_url: str) -> None:
    # Before the thread has published its wake-up event, the stop flag alone must end it.
    keeper = LeaseKeeper(db_url, lease_seconds=180.0, poll_seconds=60.0)
    keeper.start()
    await asyncio.wait_for(keeper.stop(), timeout=10)
