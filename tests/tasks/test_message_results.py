"""Message results for open tenants, through the real app on both backends (issue 49): a
blocking SendMessage answers with the agent's Message; with returnImmediately the answer is
the Task, which completes with that Message as its status message; a blocking call waits for
an interruption too; a gateway-profile tenant still gets a Task whose final message is
``<taskId>:final``, and its push too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.testing.edge import EdgeHarness, edge_harness
from tests.push.conftest import FAST, edge_and_receiver, send

TERMINAL = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED")


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url, background=True, **FAST) as harness:
        await harness.add_tenant(
            "open-t", agent="scripted", profile="open", require_push_config=False
        )
        await harness.add_tenant("plain", agent="scripted", require_push_config=False)
        yield harness


def _send(text: str, n: int = 1, **configuration: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": text}]}
    }
    if configuration:
        params["configuration"] = configuration
    return params


async def _settled(edge: EdgeHarness, task_id: str, tenant: str) -> dict[str, Any]:
    for _ in range(500):
        task = await edge.result("GetTask", {"id": task_id}, tenant=tenant)
        if task["status"]["state"] in TERMINAL:
            return dict(task)
        await asyncio.sleep(0.02)
    raise AssertionError("the task did not finish")


async def test_a_blocking_call_answers_with_the_message(edge: EdgeHarness) -> None:
    result = await edge.result(
        "SendMessage", _send("progress thinking\nmessage hello"), tenant="open-t"
    )
    assert set(result) == {"message"}
    message = result["message"]
    assert message["role"] == "ROLE_AGENT" and message["parts"] == [{"text": "hello"}]
    task_id = message["taskId"]
    assert message["messageId"] == f"{task_id}:message" and message["contextId"]
    task = await edge.result("GetTask", {"id": task_id}, tenant="open-t")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"] == message


async def test_return_immediately_answers_with_the_task(edge: EdgeHarness) -> None:
    result = await edge.result(
        "SendMessage", _send("message hello", returnImmediately=True), tenant="open-t"
    )
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    done = await _settled(edge, task["id"], "open-t")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["status"]["message"]["parts"] == [{"text": "hello"}]
    assert done["status"]["message"]["messageId"] == f"{task['id']}:message"


async def test_a_reply_is_still_a_task(edge: EdgeHarness) -> None:
    result = await edge.result("SendMessage", _send("artifact text n\nreply done"), tenant="open-t")
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["messageId"] == f"{task['id']}:final"
    assert task["artifacts"][0]["parts"] == [{"text": "n"}]


async def test_a_blocking_call_waits_for_an_interruption(edge: EdgeHarness) -> None:
    result = await edge.result(
        "SendMessage", _send("ask colour?\nmessage got {answer}"), tenant="open-t"
    )
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    answer = _send("blue", n=2)
    answer["message"].update(taskId=task["id"], contextId=task["contextId"])
    resumed = await edge.result("SendMessage", answer, tenant="open-t")
    assert resumed["message"]["parts"] == [{"text": "got blue"}]


async def test_a_file_artifact_reaches_the_task(edge: EdgeHarness) -> None:
    script = (
        "artifact file r.txt text/plain aGVsbG8=\n"
        "artifact url https://files.example.com/d/a.pdf application/pdf\nreply done"
    )
    task = (await edge.result("SendMessage", _send(script), tenant="open-t"))["task"]
    parts = [a["parts"][0] for a in task["artifacts"]]
    assert parts == [
        {"raw": "aGVsbG8=", "filename": "r.txt", "mediaType": "text/plain"},
        {
            "url": "https://files.example.com/d/a.pdf",
            "filename": "a.pdf",
            "mediaType": "application/pdf",
        },
    ]


async def test_a_gateway_profile_tenant_gets_a_task(edge: EdgeHarness) -> None:
    result = await edge.result("SendMessage", _send("message hello"), tenant="plain")
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["messageId"] == f"{task['id']}:final"


async def test_a_gateway_tenants_push_stays_final(db_url: str) -> None:
    async with edge_and_receiver(db_url) as (edge, rx):
        task_id = await send(edge, rx, "message hello")
        final = await rx.wait_for(lambda p: p.task_id == task_id, within=20)
        assert final.message_id == f"{task_id}:final" and final.text == "hello"


@pytest.mark.postgres
async def test_a_blocking_call_wakes_on_the_tasks_change_not_its_poll(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With polls ten seconds apart the answer still comes at once: the wait follows the
    task's change notifications (``LISTEN``), polling is only the fallback."""
    from app.tasks import blocking

    monkeypatch.setattr(blocking, "_FIRST_POLL", 10.0)
    monkeypatch.setattr(blocking, "_MAX_POLL", 10.0)
    async with edge_harness(pg_url, background=True, **FAST) as harness:
        await harness.add_tenant(
            "open-t", agent="scripted", profile="open", require_push_config=False
        )
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await harness.result(
            "SendMessage", _send("sleep 0.2\nmessage hello"), tenant="open-t"
        )
        assert result["message"]["parts"] == [{"text": "hello"}]
        assert loop.time() - started < 8.0
