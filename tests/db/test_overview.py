"""The overview store on both backends (issue 53's status page): unfinished turns per tenant
with the oldest's time, the leases each worker process holds, accepts and completions per
minute."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.db.engine import Database
from app.db.models import ActorRow, PushOutboxRow, TaskRow, TurnRow
from app.db.storage import open_storage


def _task(tenant: str, task: str, state: str, created: datetime, updated: datetime) -> TaskRow:
    return TaskRow(
        tenant=tenant,
        id=task,
        identity="u",
        context_id="c",
        state=state,
        status={"state": state},
        artifacts=[],
        metadata_={},
        created_at=created,
        updated_at=updated,
        version=1,
    )


def _turn(tenant: str, n: int, status: str, created: datetime) -> TurnRow:
    return TurnRow(
        tenant=tenant,
        identity="u",
        message_id=f"m{n}",
        task_id=f"t{n}",
        kind="start",
        status=status,
        content_hash="h",
        payload={},
        created_at=created,
        updated_at=created,
    )


async def test_unfinished_turns_are_counted_per_tenant_with_the_oldest(
    database: Database,
) -> None:
    now = datetime.now(UTC)
    async with database.transaction() as s:
        s.add(_turn("a", 1, "queued", now - timedelta(minutes=5)))
        s.add(_turn("a", 2, "queued", now - timedelta(minutes=1)))
        s.add(_turn("a", 3, "running", now))
        s.add(_turn("b", 4, "queued", now - timedelta(seconds=30)))
        s.add(_turn("b", 5, "done", now - timedelta(hours=1)))
    turns = await open_storage(database).overview.turns_by_tenant()
    assert [(t.tenant, t.status, t.count) for t in turns] == [
        ("a", "queued", 2),
        ("a", "running", 1),
        ("b", "queued", 1),
    ]
    assert abs((turns[0].oldest_at - (now - timedelta(minutes=5))).total_seconds()) < 1


async def test_workers_are_the_owners_of_unexpired_leases(database: Database) -> None:
    now = datetime.now(UTC)
    later = now + timedelta(minutes=5)
    async with database.transaction() as s:
        s.add(ActorRow(tenant="a", identity="u1", lease_owner="p1", lease_until=later, fence=1))
        s.add(ActorRow(tenant="a", identity="u2", lease_owner="p1", lease_until=later, fence=1))
        s.add(
            ActorRow(
                tenant="a",
                identity="u3",
                lease_owner="p2",
                lease_until=now - timedelta(minutes=1),
                fence=1,
            )
        )
        s.add(ActorRow(tenant="a", identity="u4", lease_owner=None, lease_until=None, fence=0))
        for key, owner in (("k1", "p1"), ("k2", "p3")):
            s.add(
                PushOutboxRow(
                    tenant="a",
                    identity="u1",
                    task_id="t",
                    config_id="c",
                    message_key=key,
                    kind="final",
                    payload={},
                    status="pending",
                    next_attempt_at=now,
                    lease_owner=owner,
                    lease_until=later,
                )
            )
    workers = await open_storage(database).overview.workers()
    assert [(w.owner, w.actor_leases, w.push_leases) for w in workers] == [
        ("p1", 2, 1),
        ("p3", 0, 1),
    ]
    assert all(w.lease_until > now for w in workers)


async def test_activity_counts_accepts_and_completions_per_minute(database: Database) -> None:
    now = datetime.now(UTC)
    ago = [now - timedelta(minutes=m, seconds=10) for m in range(0, 90)]
    async with database.transaction() as s:
        s.add(_task("a", "t1", "TASK_STATE_COMPLETED", ago[3], ago[1]))
        s.add(_task("a", "t2", "TASK_STATE_FAILED", ago[3], ago[3]))
        s.add(_task("a", "t3", "TASK_STATE_WORKING", ago[0], ago[0]))
        s.add(_task("b", "t4", "TASK_STATE_COMPLETED", ago[80], ago[80]))  # too old
        s.add(_task("b", "t5", "TASK_STATE_CANCELED", ago[75], ago[2]))
    activity = await open_storage(database).overview.activity(60)
    assert len(activity.accepted) == len(activity.finished) == 60
    assert sum(activity.accepted) == 3 and sum(activity.finished) == 3
    # The newest minute is last: three minutes ago holds two accepts and one completion.
    assert activity.accepted[-4] + activity.accepted[-3] == 2
    assert activity.accepted[-1] + activity.accepted[-2] == 1
    assert abs((activity.until - now).total_seconds()) < 5
