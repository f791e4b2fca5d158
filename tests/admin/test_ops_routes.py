"""``/v1/push/dead-letters`` and ``/v1/health`` on both backends (issue 52)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.db.engine import Database
from app.db.models import PushOutboxRow, TurnRow
from app.testing.edge import demo_manifest
from tests.admin.conftest import AdminRig


async def _dead(db: Database, tenant: str, task: str, key: str, kind: str = "final") -> None:
    async with db.transaction() as s:
        s.add(
            PushOutboxRow(
                tenant=tenant,
                identity="user-1",
                task_id=task,
                config_id="c1",
                message_key=key,
                kind=kind,
                payload={},
                status="dead",
                attempts=1,
                last_status=400,
                last_error="HTTP 400",
                next_attempt_at=datetime.now(UTC),
            )
        )


async def test_dead_letters_are_listed_in_pages_with_filters(admin: AdminRig) -> None:
    db = admin.edge.services.db
    await _dead(db, "a", "t1", "k1")
    await _dead(db, "a", "t2", "k2", kind="progress")
    await _dead(db, "b", "t3", "k3")
    h = await admin.headers("push:read")
    first = (await admin.client.get("/v1/push/dead-letters?limit=2", headers=h)).json()
    assert [d["taskId"] for d in first["items"]] == ["t1", "t2"] and first["next"]
    rest = await admin.client.get(f"/v1/push/dead-letters?after={first['next']}", headers=h)
    assert [d["taskId"] for d in rest.json()["items"]] == ["t3"] and rest.json()["next"] is None
    only = await admin.client.get("/v1/push/dead-letters?tenant=a&kind=progress", headers=h)
    assert [d["taskId"] for d in only.json()["items"]] == ["t2"]
    task = await admin.client.get("/v1/push/dead-letters?task=t3", headers=h)
    assert [d["tenant"] for d in task.json()["items"]] == ["b"]


async def test_dead_letters_are_replayed_one_or_many(admin: AdminRig) -> None:
    db = admin.edge.services.db
    for task in ("t1", "t2", "t3"):
        await _dead(db, "a", task, "k")
    h = await admin.headers("push:read", "push:write")
    ids = [
        d["id"]
        for d in (await admin.client.get("/v1/push/dead-letters", headers=h)).json()["items"]
    ]
    one = await admin.client.post(f"/v1/push/dead-letters/{ids[0]}/replay", headers=h)
    assert one.status_code == 200 and one.json()["requeued"] == [ids[0]]
    again = await admin.client.post(f"/v1/push/dead-letters/{ids[0]}/replay", headers=h)
    assert again.status_code == 404
    many = await admin.client.post(
        "/v1/push/dead-letters/replay", json={"ids": [ids[1], 999]}, headers=h
    )
    assert many.json() == {"requeued": [ids[1]], "superseded": [], "notDead": [999]}
    everything = await admin.client.post(
        "/v1/push/dead-letters/replay", json={"all": True}, headers=h
    )
    assert everything.json()["requeued"] == [ids[2]]
    both = await admin.client.post(
        "/v1/push/dead-letters/replay", json={"all": True, "ids": [1]}, headers=h
    )
    assert both.status_code == 400
    unknown = await admin.client.post(
        "/v1/push/dead-letters/replay", json={"every": True}, headers=h
    )
    assert unknown.status_code == 400 and "every: unknown field" in unknown.json()["detail"]


async def test_the_health_summary_counts_tenants_turns_and_the_outbox(admin: AdminRig) -> None:
    h = await admin.headers("tenants:read")
    empty = (await admin.client.get("/v1/health", headers=h)).json()
    assert empty == {
        "tenants": {"enabled": 0, "disabled": 0},
        "unfinishedTurns": {"queued": 0, "running": 0},
        "push": {"outboxDepth": 0, "oldestPendingSeconds": 0.0},
    }
    await admin.edge.add_tenant("demo", manifest=demo_manifest(), require_push_config=False)
    await admin.edge.add_tenant("off")
    await admin.edge.services.tenant_store.update("off", enabled=False)
    await admin.edge.result(
        "SendMessage",
        {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": True},
        },
    )
    summary = (await admin.client.get("/v1/health", headers=h)).json()
    assert summary["tenants"] == {"enabled": 1, "disabled": 1}
    async with admin.edge.services.db.transaction() as s:
        from sqlalchemy import func, select

        queued = (
            await s.execute(
                select(func.count()).select_from(TurnRow).where(TurnRow.status == "queued")
            )
        ).scalar_one()
    assert queued == 1 and summary["unfinishedTurns"] == {"queued": 1, "running": 0}
    assert (await admin.client.get("/v1/health")).status_code == 401
