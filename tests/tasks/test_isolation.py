"""Isolation matrix (CONTRACT §5; issue 3): another identity's or another tenant's task is
indistinguishable from a missing one on every task method, and never listed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.db.models import PushConfigRow, TaskRow
from app.tasks import states
from app.testing.edge import EdgeHarness
from tests.tasks.conftest import PUSH_URL, rpc_error, send_params

# (tenant, identity key) of callers who do not own the task; the owner is ("demo", "user-1").
STRANGERS = [("demo", "user-2"), ("open", "user-1"), ("open", "user-2")]


def _calls(task_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("GetTask", {"id": task_id}),
        ("CancelTask", {"id": task_id}),
        ("SendMessage", send_params("stranger-msg", task_id=task_id)),
        ("CreateTaskPushNotificationConfig", {"taskId": task_id, "id": "x", "url": PUSH_URL}),
        ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "owner-cfg"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "owner-cfg"}),
    ]


async def test_foreign_task_is_not_found_everywhere(edge: EdgeHarness):
    push = {"url": PUSH_URL, "token": "t", "id": "owner-cfg"}
    owned = (await edge.result("SendMessage", send_params(push=push)))["task"]
    missing = "00000000-0000-4000-8000-000000000000"
    for tenant, key in STRANGERS:
        identity = {"key": key}
        for method, params in _calls(owned["id"]):
            foreign = rpc_error(await edge.rpc(method, params, tenant=tenant, identity=identity))
            absent_params = {**params}
            for name in ("id", "taskId"):
                if name in absent_params and absent_params[name] == owned["id"]:
                    absent_params[name] = missing
            if method == "SendMessage":
                absent_params = send_params("stranger-msg-2", task_id=missing)
            absent = rpc_error(
                await edge.rpc(method, absent_params, tenant=tenant, identity=identity)
            )
            assert foreign["code"] == absent["code"] == -32001, (method, tenant, key)
            assert foreign["data"][0]["reason"] == absent["data"][0]["reason"]
        listed = await edge.result("ListTasks", {}, tenant=tenant, identity=identity)
        assert listed["tasks"] == [] and listed["totalSize"] == 0
        by_context = await edge.result(
            "ListTasks", {"contextId": owned["contextId"]}, tenant=tenant, identity=identity
        )
        assert by_context["tasks"] == []

    # The owner's task and config are untouched by all of it.
    got = await edge.result("GetTask", {"id": owned["id"]})
    assert got["status"]["state"] == states.SUBMITTED
    async with edge.services.db.transaction() as session:
        configs = (await session.execute(select(PushConfigRow.id))).scalars().all()
        tasks = (await session.execute(select(TaskRow.id))).scalars().all()
    assert list(configs) == ["owner-cfg"]
    assert list(tasks) == [owned["id"]]
    listed = await edge.result("ListTasks", {})
    assert [t["id"] for t in listed["tasks"]] == [owned["id"]]
