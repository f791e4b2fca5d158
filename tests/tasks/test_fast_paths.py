"""The hand-written PostgreSQL read and accept paths answer and write exactly what the ORM
paths do (on SQLite these tests run the ORM paths themselves, so both backends agree)."""

from __future__ import annotations

import dataclasses
import json

from sqlalchemy import select, update

from app.db.cursor import decode_cursor
from app.db.list_query import ListQuery
from app.db.models import ActorRow, PushConfigRow, TaskMessageRow, TaskRow, TurnRow
from app.db.shared.task_reads import SharedTaskReads
from app.db.shared.task_rows import load_history, load_task
from app.rpc.responses import RawJson
from app.tasks.push_secrets import PushSecrets
from app.tasks.queries import TaskQueries
from app.tasks.wire import task_doc, utcnow
from app.testing.edge import EdgeHarness
from tests.tasks.conftest import PUSH_URL, SCOPE, send_params


async def _orm_doc(edge: EdgeHarness, task_id: str, limit: int | None) -> dict[str, object]:
    async with edge.services.db.transaction() as session:
        row = await load_task(session, SCOPE, task_id)
        assert row is not None
        history = await load_history(session, SCOPE, task_id, limit)
    return task_doc(row, history=history)


async def test_get_task_matches_the_orm_document(edge: EdgeHarness):
    task_id = (await edge.result("SendMessage", send_params("m-1", "héllo ✓")))["task"]["id"]
    artifacts = [{"artifactId": "a-1", "parts": [{"text": "out"}, {"data": {"n": 1.5}}]}]
    metadata = {"k": "v", "nested": {"list": [1, None, True]}}
    async with edge.services.db.transaction() as session:
        await session.execute(
            update(TaskRow)
            .where(TaskRow.tenant == SCOPE.tenant, TaskRow.id == task_id)
            .values(artifacts=artifacts, metadata_=metadata)
        )
    for limit, params in ((50, {}), (0, {"historyLength": 0}), (1, {"historyLength": 1})):
        got = await edge.result("GetTask", {"id": task_id, **params})
        assert got == await _orm_doc(edge, task_id, limit)
    full = await edge.result("GetTask", {"id": task_id})
    assert full["artifacts"] == artifacts
    assert full["metadata"] == metadata
    assert full["history"][0]["parts"] == [{"text": "héllo ✓"}]
    assert "history" not in await edge.result("GetTask", {"id": task_id, "historyLength": 0})


async def test_get_task_leaves_out_empty_members(edge: EdgeHarness):
    task_id = (await edge.result("SendMessage", send_params("m-1")))["task"]["id"]
    got = await edge.result("GetTask", {"id": task_id, "historyLength": 0})
    assert set(got) == {"id", "contextId", "status"}


async def test_accept_writes_every_row_once(edge: EdgeHarness):
    answer = await edge.result("SendMessage", send_params("m-1", context_id="ctx-1"))
    task_id = answer["task"]["id"]
    assert answer["task"]["contextId"] == "ctx-1"
    assert answer["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    async with edge.services.db.transaction() as session:
        task = (await session.execute(select(TaskRow))).scalar_one()
        turn = (await session.execute(select(TurnRow))).scalar_one()
        message = (await session.execute(select(TaskMessageRow))).scalar_one()
        push = (await session.execute(select(PushConfigRow))).scalar_one()
        actor = (await session.execute(select(ActorRow))).scalar_one()
    assert (task.id, task.identity, task.context_id, task.version) == (
        task_id,
        SCOPE.identity,
        "ctx-1",
        1,
    )
    assert task.status == answer["task"]["status"]
    assert (turn.task_id, turn.message_id, turn.status, turn.kind) == (
        task_id,
        "m-1",
        "queued",
        "start",
    )
    assert turn.payload["message"]["taskId"] == task_id
    assert (message.seq, message.role) == (1, "ROLE_USER")
    assert message.message["taskId"] == task_id and message.message["contextId"] == "ctx-1"
    assert (push.task_id, push.identity, push.url) == (task_id, SCOPE.identity, PUSH_URL)
    assert push.token_enc is not None and "notify-token" not in push.token_enc
    secrets = PushSecrets.from_settings(edge.settings, edge.services.key)
    assert secrets.decrypt(push.token_enc) == "notify-token"
    assert (actor.identity, actor.fence) == (SCOPE.identity, 0)
    again = await edge.result("SendMessage", send_params("m-1", context_id="ctx-1"))
    assert again["task"]["id"] == task_id


async def test_get_task_params_outside_the_plain_shape_still_parse(edge: EdgeHarness):
    task_id = (await edge.result("SendMessage", send_params("m-1")))["task"]["id"]
    # protobuf-JSON accepts an int64/int32 as a string and the proto field name.
    for params in ({"historyLength": "0"}, {"history_length": 0}, {"historyLength": 0.0}):
        got = await edge.result("GetTask", {"id": task_id, **params})
        assert "history" not in got, params
    for bad in ({"historyLength": "x"}, {"historyLength": True}, {"id": 5}, {"id": ""}):
        response = await edge.rpc("GetTask", {"id": task_id, **bad})
        assert response.json()["error"]["code"] == -32602, bad


async def test_list_tasks_matches_the_orm_pages(edge: EdgeHarness):
    """Every filter, the cursor, history and artifacts: the PostgreSQL statement's pages are
    the ORM's pages (another identity's tasks in the same tenant are in neither)."""
    other = {"key": "user-2", "slack_user": "U2"}
    await edge.result("SendMessage", send_params("o-1", context_id="ctx-a"), identity=other)
    ids = []
    for n in range(7):
        params = send_params(f"m-{n}", f"text {n} ✓", context_id="ctx-a" if n % 2 else "ctx-b")
        ids.append((await edge.result("SendMessage", params))["task"]["id"])
    artifacts = [{"artifactId": "a-1", "parts": [{"text": "out"}]}]
    async with edge.services.db.transaction() as session:
        await session.execute(
            update(TaskRow)
            .where(TaskRow.tenant == SCOPE.tenant, TaskRow.id.in_(ids[:3]))
            .values(state="TASK_STATE_COMPLETED", artifacts=artifacts, metadata_={"k": [1]})
        )
    queries = TaskQueries(edge.services.db, default_history_length=10)
    reference = SharedTaskReads(edge.services.db)  # the SQLite path, run on PostgreSQL
    cases = [
        ListQuery(),
        ListQuery(page_size=3),
        ListQuery(page_size=2, history_length=5, include_artifacts=True),
        ListQuery(context_id="ctx-a", history_length=1),
        ListQuery(state="TASK_STATE_COMPLETED", include_artifacts=True),
        ListQuery(status_after=utcnow()),  # nothing changed since: an empty page
        ListQuery(context_id="ctx-b", state="TASK_STATE_SUBMITTED", page_size=1),
        ListQuery(context_id="", state=""),  # empty filters filter nothing, on both paths
    ]
    for query in cases:
        pages = 0
        while True:
            wire = await queries.list_wire(SCOPE, query)
            got = json.loads(wire.text) if isinstance(wire, RawJson) else wire
            cursor = decode_cursor(query.page_token) if query.page_token else None
            assert got == await reference.list(SCOPE, query, cursor), query
            pages += 1
            assert pages <= len(ids), "the cursor does not move"
            if not got["nextPageToken"]:
                break
            query = dataclasses.replace(query, page_token=got["nextPageToken"])
        assert pages == max(1, -(-got["totalSize"] // query.page_size)), query
