"""GetTask and ListTasks (CONTRACT §5): history bounds, filters, keyset paging."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from app.db.cursor import decode_cursor, encode_cursor
from app.db.models import TaskRow
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.tasks.turn_writes import TurnWrites
from app.tasks.wire import timestamp_json, utcnow
from app.testing.edge import EdgeHarness
from tests.tasks.conftest import SCOPE, hold_lease, rpc_error, send_params


async def _task_with_history(edge: EdgeHarness, rounds: int) -> str:
    """A task whose history holds 2 * rounds messages (question/answer pairs)."""
    db = edge.services.db
    writes = TurnWrites(db, edge.settings)
    task_id = (await edge.result("SendMessage", send_params("m-0")))["task"]["id"]
    fence = await hold_lease(db)
    for n in range(rounds):
        assert await writes.mark_working(SCOPE, task_id, fence)
        assert await writes.finish(
            SCOPE, task_id, fence, TurnOutcome(states.INPUT_REQUIRED, f"q{n}")
        )
        if n < rounds - 1:
            await edge.result("SendMessage", send_params(f"m-{n + 1}", task_id=task_id))
    return task_id


async def test_get_task_history_bounds(edge: EdgeHarness):
    task_id = await _task_with_history(edge, 3)  # 6 messages
    full = await edge.result("GetTask", {"id": task_id})
    assert len(full["history"]) == 6
    assert full["history"][0]["messageId"] == "m-0"
    none = await edge.result("GetTask", {"id": task_id, "historyLength": 0})
    assert "history" not in none
    last2 = await edge.result("GetTask", {"id": task_id, "historyLength": 2})
    assert [m["role"] for m in last2["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    assert last2["history"][-1]["parts"] == [{"text": "q2"}]
    more = await edge.result("GetTask", {"id": task_id, "historyLength": 100})
    assert len(more["history"]) == 6
    error = rpc_error(await edge.rpc("GetTask", {"id": task_id, "historyLength": -1}))
    assert error["code"] == -32602
    assert rpc_error(await edge.rpc("GetTask", {}))["code"] == -32602
    assert rpc_error(await edge.rpc("GetTask", {"id": "missing"}))["code"] == -32001


async def test_get_task_default_history_is_bounded(db_url: str):
    from app.testing.edge import edge_harness

    async with edge_harness(db_url, default_history_length=3) as edge:
        await edge.add_tenant("demo")
        task_id = await _task_with_history(edge, 3)
        got = await edge.result("GetTask", {"id": task_id})
        assert len(got["history"]) == 3


async def _make_tasks(edge: EdgeHarness, n: int, **kwargs) -> list[str]:
    ids = []
    for i in range(n):
        result = await edge.result("SendMessage", send_params(f"list-{i}", **kwargs))
        ids.append(result["task"]["id"])
    return ids


async def test_list_newest_first_across_three_pages(edge: EdgeHarness):
    ids = await _make_tasks(edge, 7)
    newest_first = list(reversed(ids))
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        params = {"pageSize": 3, **({"pageToken": token} if token else {})}
        page = await edge.result("ListTasks", params)
        pages += 1
        assert page["totalSize"] == (7 if pages == 1 else 8)
        assert page["pageSize"] == 3
        assert len(page["tasks"]) == (3 if pages < 3 else 1)
        seen += [t["id"] for t in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            break
        # A task created meanwhile does not shift the cursor: keyset, not OFFSET.
        if pages == 1:
            await edge.result("SendMessage", send_params("late"))
    assert pages == 3
    assert seen == newest_first
    # The same token gives the same page again (stable cursor).
    first = await edge.result("ListTasks", {"pageSize": 3})
    second = await edge.result("ListTasks", {"pageSize": 3, "pageToken": first["nextPageToken"]})
    again = await edge.result("ListTasks", {"pageSize": 3, "pageToken": first["nextPageToken"]})
    assert second == again


async def test_list_default_page_and_bounds(edge: EdgeHarness):
    await _make_tasks(edge, 2)
    page = await edge.result("ListTasks", {})
    assert page["nextPageToken"] == ""
    assert page["pageSize"] == 50
    assert page["totalSize"] == 2
    for size in (0, 101, -1):
        error = rpc_error(await edge.rpc("ListTasks", {"pageSize": size}))
        assert error["code"] == -32602
    bad = rpc_error(await edge.rpc("ListTasks", {"pageToken": "not!a!token"}))
    assert bad["code"] == -32602
    assert rpc_error(await edge.rpc("ListTasks", {"status": "NOPE"}))["code"] == -32602


async def test_list_filters(edge: EdgeHarness):
    a = (await edge.result("SendMessage", send_params("a", context_id="ctx-a")))["task"]["id"]
    b = (await edge.result("SendMessage", send_params("b", context_id="ctx-b")))["task"]["id"]
    await edge.result("CancelTask", {"id": b})

    by_context = await edge.result("ListTasks", {"contextId": "ctx-a"})
    assert [t["id"] for t in by_context["tasks"]] == [a]
    assert by_context["totalSize"] == 1

    canceled = await edge.result("ListTasks", {"status": states.CANCELED})
    assert [t["id"] for t in canceled["tasks"]] == [b]

    # statusTimestampAfter: only tasks whose status changed after the instant.
    db = edge.services.db
    old = utcnow() - timedelta(hours=1)
    async with db.transaction() as session:
        await session.execute(update(TaskRow).where(TaskRow.id == a).values(updated_at=old))
    after = timestamp_json(utcnow() - timedelta(minutes=5))
    recent = await edge.result("ListTasks", {"statusTimestampAfter": after})
    assert [t["id"] for t in recent["tasks"]] == [b]
    bad = rpc_error(await edge.rpc("ListTasks", {"statusTimestampAfter": "yesterday"}))
    assert bad["code"] == -32602


async def test_list_history_and_artifacts_options(edge: EdgeHarness):
    db = edge.services.db
    writes = TurnWrites(db, edge.settings)
    task_id = (await edge.result("SendMessage", send_params()))["task"]["id"]
    fence = await hold_lease(db)
    assert await writes.mark_working(SCOPE, task_id, fence)
    outcome = TurnOutcome(
        states.COMPLETED, "ok", artifacts=({"artifactId": "a", "parts": [{"text": "x"}]},)
    )
    assert await writes.finish(SCOPE, task_id, fence, outcome)
    plain = (await edge.result("ListTasks", {}))["tasks"][0]
    assert "history" not in plain and "artifacts" not in plain
    rich = await edge.result("ListTasks", {"historyLength": 1, "includeArtifacts": True})
    task = rich["tasks"][0]
    assert [m["role"] for m in task["history"]] == ["ROLE_AGENT"]
    assert task["artifacts"][0]["artifactId"] == "a"
    # GetTask carries artifacts
    assert (await edge.result("GetTask", {"id": task_id}))["artifacts"][0]["artifactId"] == "a"


def test_cursor_round_trip():
    now = utcnow()
    assert decode_cursor(encode_cursor(now, "abc")) == (now, "abc")
