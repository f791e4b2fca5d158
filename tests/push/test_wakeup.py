"""Wake-ups (``app.db.signals``): a committed outbox row wakes the deliverer at once (in
process, and by NOTIFY on PostgreSQL when no deliverer of this process has a free slot);
polling stays the fallback.
Graceful stop lets an attempt on the wire finish."""

from __future__ import annotations

import asyncio

from app.db.engine import Database
from app.db.signals import PUSH_CHANNEL as CHANNEL
from app.db.signals import TURNS_CHANNEL as NOTIFY_CHANNEL
from app.testing.push_faults import hang
from tests.db.helpers import notifications
from tests.polling import poll_until
from tests.push.conftest import PushRig, edge_and_receiver, send


async def test_a_commit_wakes_a_deliverer_that_polls_rarely(rig: PushRig) -> None:
    await rig.add_config("t1")
    await rig.start(poll_seconds=60)
    await asyncio.sleep(0.1)  # the deliverer is now waiting on its 60 s poll
    await rig.queue("t1", "final", kind="final")
    await rig.rx.wait_for(lambda p: p.message_id == "t1:final", within=5)


async def test_a_rolled_back_enqueue_queues_nothing(rig: PushRig) -> None:
    from app.db.outbox import enqueue_push
    from tests.push.conftest import SCOPE, payload

    await rig.add_config("t1")

    class Boom(Exception):
        pass

    try:
        async with rig.db.transaction() as s:
            await enqueue_push(
                s,
                rig.db.signals.pushes,
                scope=SCOPE,
                task_id="t1",
                kind="final",
                message_key="final",
                payload=payload("t1", "final"),
            )
            raise Boom
    except Boom:
        pass
    assert await rig.rows() == []


async def test_listen_hears_notify_from_another_connection(
    pg_url: str, pg_database: Database
) -> None:
    from sqlalchemy import text

    heard = asyncio.Event()
    task = asyncio.create_task(pg_database.signals.pushes.listen(heard.set))
    try:
        await asyncio.wait_for(heard.wait(), 5)  # woken once on connect
        heard.clear()
        other = Database(pg_url)
        try:
            async with other.transaction() as s:
                await s.execute(text("SELECT pg_notify(:c, '')"), {"c": CHANNEL})
        finally:
            await other.dispose()
        await asyncio.wait_for(heard.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_stop_lets_the_attempt_on_the_wire_finish(rig: PushRig) -> None:
    await rig.add_config("t1")
    await rig.queue("t1", "final", kind="final")
    rig.rx.fault = hang(0.3)
    deliverer = await rig.start()
    await rig.wait_rows(lambda rs: rs[0].lease_owner is not None)
    await deliverer.stop()
    rig.deliverers.remove(deliverer)
    [row] = await rig.rows()
    assert row.status == "delivered" and row.lease_owner is None


async def test_a_deliverer_offers_room_while_it_has_a_free_slot(rig: PushRig) -> None:
    wakeup = rig.db.signals.pushes
    assert not wakeup.local_room()
    await rig.add_config("t1")
    rig.rx.fault = hang(0.5)
    deliverer = await rig.start(push_concurrency=1)
    assert wakeup.local_room()
    await rig.queue("t1", "final", kind="final")
    await rig.wait_rows(lambda rs: rs[0].lease_owner is not None)
    assert not wakeup.local_room()  # its one slot holds the attempt on the wire
    await rig.wait_rows(lambda rs: rs[0].status == "delivered")
    await poll_until(wakeup.local_room, 5, interval=0.01, what="the slot given back")
    await deliverer.stop()
    rig.deliverers.remove(deliverer)
    assert not wakeup.local_room()


async def test_a_push_this_process_sends_raises_no_notify(pg_rig: PushRig) -> None:
    rig = pg_rig
    await rig.add_config("t1")
    async with notifications(rig.db_url, CHANNEL) as heard:
        await rig.start(poll_seconds=60)  # no poll within the test: delivery means a wake-up
        await rig.queue("t1", "one")
        await rig.rx.wait_for(lambda p: p.message_id == "t1:one", within=5)
        assert await heard.settle() == []
        await rig.stop_all()  # no deliverer here now: the others must hear of the next one
        await rig.queue("t1", "two")
        assert await heard.settle() == [CHANNEL]


async def test_a_turn_and_its_pushes_in_one_process_raise_no_notify(pg_url: str) -> None:
    """The whole pipeline in one process (``serve``): accept, the worker's progress and final
    writes and both deliveries are woken in process, and nothing wakes other processes."""
    async with (
        edge_and_receiver(pg_url, poll_seconds=60) as (edge, rx),
        notifications(pg_url, NOTIFY_CHANNEL, CHANNEL) as heard,
    ):
        task_id = await send(edge, rx, "progress thinking\nreply done")
        await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)
        assert [p.message_id for p in rx.requests] == [f"{task_id}:line-1", f"{task_id}:final"]
        assert await heard.settle() == []
