"""Accept → worker → guarded writes, through the real app with background workers."""

from __future__ import annotations

from typing import Any

from app.tasks import states
from app.testing.edge import edge_harness
from tests.polling import poll_until
from tests.tasks.conftest import send_params


async def test_dispatch_runs_to_completion(db_url: str):
    async with edge_harness(db_url, background=True) as edge:
        await edge.add_tenant("demo", agent="echo")
        task = (await edge.result("SendMessage", send_params(text="ping")))["task"]

        async def finished() -> Any:
            got = await edge.result("GetTask", {"id": task["id"]})
            return got if got["status"]["state"] in states.TERMINAL else None

        got = await poll_until(finished, 10, interval=0.02, what="a terminal task")
        assert got["status"]["state"] == states.COMPLETED
        assert got["status"]["message"]["messageId"] == f"{task['id']}:final"


async def test_blocking_ask_and_resume(db_url: str):
    async with edge_harness(db_url, background=True) as edge:
        await edge.add_tenant("open", agent="scripted", require_push_config=False)
        asked = (
            await edge.result(
                "SendMessage", send_params("b1", "ask which color?", push=None), tenant="open"
            )
        )["task"]
        assert asked["status"]["state"] == states.INPUT_REQUIRED
        answer = send_params("b2", "blue", push=None, task_id=asked["id"])
        done = (await edge.result("SendMessage", answer, tenant="open"))["task"]
        assert done["id"] == asked["id"]
        assert done["status"]["state"] == states.COMPLETED
        assert [m["messageId"] for m in done["history"]][::2] == ["b1", "b2"]
