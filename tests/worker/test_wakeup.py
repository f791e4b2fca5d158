"""Who an accepted turn wakes (``app.db.signals``): this process's own worker when it has a
free slot, with no ``NOTIFY``; every process's workers (``NOTIFY looping_turns``) when it has
none, or there is no worker here."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from app.db.engine import Database
from app.db.signals import TURNS_CHANNEL as NOTIFY_CHANNEL
from app.db.signals import WakeChannel
from app.tasks import states
from app.testing.edge import edge_harness
from app.worker.service import TurnWorker
from tests.db.helpers import Notifications, notifications
from tests.worker.helpers import eventually, identity, send, task_row

# No poll to fall back on within the test: a turn that runs was woken.
SLOW_POLL = {"poll_seconds": 60, "lease_seconds": 5}


def test_local_room_is_what_the_worker_offers() -> None:
    wakeup = WakeChannel(NOTIFY_CHANNEL, database_url="postgresql+asyncpg://h/db")
    assert not wakeup.local_room()  # no worker in this process
    assert wakeup.remote_channel() == NOTIFY_CHANNEL
    free = [True]
    unsubscribe = wakeup.subscribe(lambda: None, lambda: free[0])
    assert wakeup.local_room()
    assert wakeup.remote_channel() is None
    free[0] = False
    assert not wakeup.local_room()
    free[0] = True
    unsubscribe()
    assert not wakeup.local_room()


def test_storage_no_other_process_shares_has_no_one_to_notify() -> None:
    wakeup = WakeChannel(NOTIFY_CHANNEL)
    assert not wakeup.local_room()
    assert wakeup.remote_channel() is None


async def test_a_turn_the_local_worker_takes_is_run_without_a_notify(pg_url: str) -> None:
    async with (
        edge_harness(pg_url, background=True, **SLOW_POLL) as edge,
        notifications(pg_url, NOTIFY_CHANNEL) as heard,
    ):
        await edge.add_tenant("demo", agent="scripted", require_push_config=False)
        assert edge.services.db.signals.turns.local_room()
        task_id = await send(edge, "reply hi", message_id="m1", push_url=None)
        db = edge.services.db

        async def done() -> bool:
            return (await task_row(db, task_id)).state == states.COMPLETED

        await eventually(done, timeout=20)
        assert await heard.settle() == []


async def test_without_a_worker_here_the_accept_wakes_the_others(pg_url: str) -> None:
    async with (
        edge_harness(pg_url, **SLOW_POLL) as edge,
        notifications(pg_url, NOTIFY_CHANNEL) as heard,
    ):
        await edge.add_tenant("demo", agent="scripted", require_push_config=False)
        assert not edge.services.db.signals.turns.local_room()
        await send(edge, "reply hi", message_id="m1", push_url=None)
        assert await heard.settle() == [NOTIFY_CHANNEL]


async def test_a_busy_local_worker_leaves_the_turn_to_the_others(pg_url: str) -> None:
    async with (
        edge_harness(pg_url, background=True, worker_concurrency=1, **SLOW_POLL) as edge,
        notifications(pg_url, NOTIFY_CHANNEL) as heard,
    ):
        await edge.add_tenant("demo", agent="scripted", require_push_config=False)
        db = edge.services.db
        first = await send(edge, "sleep 30", message_id="m1", who="user-1", push_url=None)

        async def running() -> bool:
            return (await task_row(db, first)).state == states.WORKING

        await eventually(running, timeout=20)
        assert await heard.settle() == []  # the first went to the idle local worker
        assert not edge.services.db.signals.turns.local_room()
        await send(edge, "reply hi", message_id="m2", who="user-2", push_url=None)
        assert await heard.settle() == [NOTIFY_CHANNEL]
        await edge.result("CancelTask", {"id": first}, identity=identity("user-1"))


async def test_a_stopped_worker_offers_no_room(pg_url: str) -> None:
    async with edge_harness(pg_url, background=True, **SLOW_POLL) as edge:
        [worker] = [s for s in edge.services.background if isinstance(s, TurnWorker)]
        assert edge.services.db.signals.turns.local_room()
        await worker.stop()
        assert not edge.services.db.signals.turns.local_room()
        await worker.start()
        assert edge.services.db.signals.turns.local_room()


async def test_a_turn_sent_without_a_notify_is_still_run_by_another_process(pg_url: str) -> None:
    """The poll behind the local wake-up: a process whose worker said it had room and then
    never claimed (it stopped, or died) leaves the turn to the others' ``EDGE_POLL_SECONDS``."""
    async with edge_harness(pg_url, **SLOW_POLL) as accepting:
        await accepting.add_tenant("demo", agent="scripted", require_push_config=False)
        accepting.services.db.signals.turns.subscribe(
            lambda: None, lambda: True
        )  # a worker that will never claim
        async with (
            edge_harness(pg_url, background=True, poll_seconds=0.2, lease_seconds=5) as other,
            notifications(pg_url, NOTIFY_CHANNEL) as heard,
        ):
            db = other.services.db
            # Past the other worker's start-up wake-ups (its first claim, and the one when its
            # LISTEN connection comes up), so only its poll can find the turn.
            await eventually(lambda: _listening(db, heard), timeout=10)
            await asyncio.sleep(0.5)
            task_id = await send(accepting, "reply hi", message_id="m1", push_url=None)
            assert await heard.settle() == []

            async def done() -> bool:
                return (await task_row(db, task_id)).state == states.COMPLETED

            await eventually(done, timeout=20)


async def _listening(db: Database, heard: Notifications) -> bool:
    """A backend other than the test's own has run ``LISTEN looping_turns``: the worker's."""
    async with db.transaction() as s:
        found = await s.execute(
            # asyncpg quotes the channel name.
            text("SELECT 1 FROM pg_stat_activity WHERE query LIKE :q AND pid <> :own"),
            {"q": f"LISTEN %{NOTIFY_CHANNEL}%", "own": heard.backend_pid},
        )
        return found.first() is not None
