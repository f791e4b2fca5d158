"""Per task in order, never two of one task at once, across deliverers; crash recovery."""

from __future__ import annotations

import pytest

from app.push.store import OutboxStore
from app.testing.push_faults import always, fail_first, hang
from tests.push.conftest import PushRig


async def test_rows_of_one_task_go_in_order_one_at_a_time(rig: PushRig) -> None:
    await rig.add_config("t1")
    keys = ["s1", "s2", "s3", "s4"]
    for key in keys:
        await rig.queue("t1", key)
    await rig.queue("t1", "final", kind="final", state="TASK_STATE_COMPLETED")
    rig.rx.fault = hang(0.05)  # every answer takes a while: overlap would show
    await rig.start()
    await rig.wait_rows(lambda rs: all(r.status == "delivered" for r in rs))
    assert [p.message_id for p in rig.rx.requests] == [f"t1:{k}" for k in [*keys, "final"]]
    assert rig.rx.max_concurrent_per_path == 1


async def test_a_failing_row_holds_back_the_rest_of_its_task_only(rig: PushRig) -> None:
    await rig.add_config("t1")
    await rig.add_config("t2")
    await rig.queue("t1", "s1")
    await rig.queue("t1", "final", kind="final")
    await rig.queue("t2", "final", kind="final")
    rig.rx.fault = always(503, retry_after="600")  # t1:s1 and t2:final wait ten minutes
    await rig.start()
    rows = await rig.wait_rows(lambda rs: sum(r.last_status == 503 for r in rs) == 2)
    by_key = {(r.task_id, r.message_key): r for r in rows}
    assert by_key[("t1", "final")].attempts == 0  # never overtakes its task's earlier row
    assert by_key[("t2", "final")].attempts == 1  # another task is not held back


async def test_a_dead_row_does_not_block_its_task(rig: PushRig) -> None:
    await rig.add_config("t1")
    await rig.queue("t1", "s1")
    await rig.queue("t1", "final", kind="final")
    rig.rx.fault = fail_first(1, status=400)
    await rig.start()
    rows = await rig.wait_rows(lambda rs: rs[1].status == "delivered")
    assert rows[0].status == "dead"
    assert [p.message_id for p in rig.rx.deliveries] == ["t1:final"]


async def test_replay_skips_progress_superseded_by_a_later_delivery(rig: PushRig) -> None:
    from app.push.dead_letters import replay

    await rig.add_config("t1")
    await rig.queue("t1", "s1")
    await rig.queue("t1", "final", kind="final")
    rig.rx.fault = fail_first(1, status=400)
    await rig.start()
    rows = await rig.wait_rows(lambda rs: rs[1].status == "delivered")
    report = await replay(rig.db)
    assert report.requeued == () and report.superseded == (rows[0].id,)
    missing = await replay(rig.db, ids=[rows[1].id, 999])
    assert missing.not_dead == (rows[1].id, 999)


@pytest.mark.postgres
async def test_two_deliverers_never_send_two_of_one_task_at_once(pg_rig: PushRig) -> None:
    rig = pg_rig
    tasks = [f"t{i}" for i in range(6)]
    for task in tasks:
        await rig.add_config(task)
        for step in range(4):
            await rig.queue(task, f"s{step}")
        await rig.queue(task, "final", kind="final")
    rig.rx.fault = hang(0.02)
    await rig.start("a", push_concurrency=4)
    await rig.start("b", push_concurrency=4)
    await rig.start("c", push_concurrency=4)
    await rig.wait_rows(lambda rs: all(r.status == "delivered" for r in rs), within=20)
    assert rig.rx.max_concurrent_per_path == 1
    for task in tasks:
        sent = [p.message_id for p in rig.rx.requests if p.task_id == task]
        assert sent == [f"{task}:s{i}" for i in range(4)] + [f"{task}:final"]
    assert all(r.attempts == 1 for r in await rig.rows())


async def test_a_crashed_deliverers_lease_runs_out_and_the_push_is_sent(rig: PushRig) -> None:
    await rig.add_config("t1")
    await rig.queue("t1", "final", kind="final", state="TASK_STATE_COMPLETED")
    # A deliverer claims the row and dies before sending (its lease is all that is left).
    crashed = OutboxStore(rig.db, owner="crashed", lease_seconds=0.3)
    assert [p.message_key for p in await crashed.claim(10)] == ["final"]
    assert await crashed.claim(10) == []  # leased: nobody else may take it meanwhile
    await rig.start("survivor")
    push = await rig.rx.wait_for(lambda p: p.message_id == "t1:final")
    assert push.state == "TASK_STATE_COMPLETED"
    rows = await rig.wait_rows(lambda rs: rs[0].status == "delivered")
    assert rows[0].attempts == 2 and rows[0].lease_owner is None


async def test_a_zombie_cannot_record_over_the_new_owner(rig: PushRig) -> None:
    from app.push.policy import AttemptResult, Outcome, RetryPolicy

    await rig.add_config("t1")
    await rig.queue("t1", "final", kind="final")
    zombie = OutboxStore(rig.db, owner="zombie", lease_seconds=0.05)
    [claimed] = await zombie.claim(10)
    await rig.start("survivor")
    await rig.wait_rows(lambda rs: rs[0].status == "delivered")
    policy = RetryPolicy(0.01, 0.05, 60, 1)
    result = AttemptResult(Outcome.PERMANENT, status=400, error="HTTP 400")
    decision = await zombie.record(
        claimed,
        400,
        lambda now: policy.decide(
            result, attempts=1, unauthorized_attempts=0, first_attempt_at=now, now=now
        ),
    )
    assert decision is None
    assert (await rig.rows())[0].status == "delivered"
    assert not await zombie.still_ours(claimed)


async def test_gauges_report_depth_and_age(rig: PushRig) -> None:
    await rig.add_config("t1")
    await rig.queue("t1", "s1")
    await rig.queue("t1", "s2")
    store = OutboxStore(rig.db, owner="x", lease_seconds=5)
    gauges = await store.gauges()
    assert gauges.depth == 2 and gauges.oldest_pending_seconds >= 0
    rig.rx.fault = always(503, retry_after="600")
    await rig.start()
    await rig.wait_rows(lambda rs: rs[0].last_status == 503)
    assert rig.metrics.push_outbox_depth._value.get() == 2
    assert rig.metrics.push_oldest_pending_seconds._value.get() >= 0


async def test_replay_skips_a_question_superseded_by_a_later_delivery(rig: PushRig) -> None:
    # An INPUT_REQUIRED push is stored as a final push; once the task's later push was
    # delivered, replaying the question would show the gateway an answered question last.
    from app.push.dead_letters import replay

    await rig.add_config("t1")
    await rig.queue("t1", "ask-1", kind="final", state="TASK_STATE_INPUT_REQUIRED")
    await rig.queue("t1", "final", kind="final", state="TASK_STATE_COMPLETED")
    rig.rx.fault = fail_first(1, status=400)
    await rig.start()
    rows = await rig.wait_rows(lambda rs: rs[1].status == "delivered")
    assert rows[0].status == "dead"
    report = await replay(rig.db)
    assert report.requeued == () and report.superseded == (rows[0].id,)
    assert (await rig.rows())[0].status == "dead"
    assert [p.message_id for p in rig.rx.deliveries] == ["t1:final"]
