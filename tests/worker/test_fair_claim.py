"""Fair worker slots (issue 47, row 3), on both backends: the claim serves tenants holding the
fewest leases first, then the identity that has waited longest since it was last served; a
worker gives its slot back after each turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from app.db.engine import Database
from app.db.models import ActorRow
from app.tasks import states
from app.testing.edge import edge_harness
from tests.worker.helpers import claim_head, eventually, reached, scripted_edge, send, turns

LEASE = 30.0


async def _set_actor(db: Database, tenant: str, who: str, **values: object) -> None:
    async with db.transaction() as s:
        await s.execute(
            update(ActorRow)
            .where(ActorRow.tenant == tenant, ActorRow.identity == who)
            .values(**values)
        )


async def test_an_identity_just_served_goes_behind_a_waiting_newcomer(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        db = edge.services.db
        await send(edge, "reply 1", message_id="a1", who="alice")
        lease, head = await claim_head(db, begin=True)
        assert await db.storage.mailbox.settle(lease, head.id, states.TURN_DONE)
        assert await db.storage.mailbox.release(lease)
        # Her lease was taken long ago (a long turn) and she queues her next turn before the
        # newcomer arrives: the oldest claim and the oldest waiting turn are hers, yet she was
        # just served and bob never was.
        long_ago = datetime.now(UTC) - timedelta(hours=1)
        await _set_actor(db, "demo", "alice", updated_at=long_ago)
        await send(edge, "reply 2", message_id="a2", who="alice")
        await send(edge, "reply 1", message_id="b1", who="bob")
        (first,) = await db.storage.mailbox.claim(owner="w1", limit=1, lease_seconds=LEASE)
        assert first.scope.identity == "bob"
        (second,) = await db.storage.mailbox.claim(owner="w1", limit=1, lease_seconds=LEASE)
        assert second.scope.identity == "alice"


async def test_a_tenant_holding_leases_yields_to_another_tenants_waiting_identity(
    db_url: str,
) -> None:
    async with scripted_edge(db_url) as edge:
        db = edge.services.db
        for tenant in ("busy", "calm"):
            await edge.add_tenant(tenant, agent="scripted")
        for n in range(1, 5):
            await send(edge, "reply", message_id=f"b{n}", who=f"b{n}", tenant="busy")
        await send(edge, "reply", message_id="c1", who="c1", tenant="calm")
        now = datetime.now(UTC)
        for n in range(1, 4):  # three identities of "busy" run on other workers right now
            await _set_actor(
                db, "busy", f"b{n}", lease_owner="other", lease_until=now + timedelta(hours=1)
            )
        # c1 was served a moment ago, b4 never was: without tenant shares b4 would go first.
        await _set_actor(db, "calm", "c1", last_served_at=now, updated_at=now)
        (lease,) = await db.storage.mailbox.claim(owner="w1", limit=1, lease_seconds=LEASE)
        assert (lease.scope.tenant, lease.scope.identity) == ("calm", "c1")


async def test_the_slots_of_one_claim_are_shared_between_tenants(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        db = edge.services.db
        await edge.add_tenant("other", agent="scripted")
        for n in range(4):
            await send(edge, "reply", message_id=f"d{n}", who=f"d{n}")
        for n in range(2):
            await send(edge, "reply", message_id=f"o{n}", who=f"o{n}", tenant="other")
        leases = await db.storage.mailbox.claim(owner="w1", limit=4, lease_seconds=LEASE)
        tenants = sorted(lease.scope.tenant for lease in leases)
        assert tenants == ["demo", "demo", "other", "other"]


async def test_a_worker_gives_its_slot_back_after_each_turn(db_url: str) -> None:
    settings = {"poll_seconds": 0.1, "lease_seconds": 5, "worker_concurrency": 1}
    async with edge_harness(db_url, background=True, **settings) as edge:
        await edge.add_tenant("demo", agent="scripted")
        db = edge.services.db
        ids = [
            await send(edge, f"sleep 0.3\nreply a{n}", message_id=f"a{n}", who="alice")
            for n in range(3)
        ]
        ids.append(await send(edge, "reply b", message_id="b0", who="bob"))
        for task_id in ids:
            await eventually(lambda t=task_id: reached(db, t, states.COMPLETED))  # type: ignore[misc]
        done = sorted(await turns(db), key=lambda t: (t.updated_at, t.id))
        order = [t.message_id for t in done]
        # One slot: bob waits for alice's turn that is running, not for her whole queue.
        assert order.index("b0") < order.index("a2"), order
