"""Accept → worker → outbox → deliverer → a real loopback receiver, through the real app."""

from __future__ import annotations

from tests.push.conftest import edge_and_receiver, send


async def test_progress_and_final_reach_the_gateway_verified(db_url: str) -> None:
    async with edge_and_receiver(db_url) as (edge, rx):
        task_id = await send(edge, rx, "progress thinking\nreply done")
        final = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)
        assert final.state == "TASK_STATE_COMPLETED" and final.text == "done"
        assert final.claims is not None and final.claims["aud"] == final.url
        sent = [(p.message_id, p.state) for p in rx.requests]
        assert sent == [
            (f"{task_id}:line-1", "TASK_STATE_WORKING"),
            (f"{task_id}:final", "TASK_STATE_COMPLETED"),
        ]
        assert all(p.error is None for p in rx.requests)
        assert "SUBMITTED" not in str([p.state for p in rx.requests])


async def test_input_required_is_pushed_and_the_resume_completes(db_url: str) -> None:
    async with edge_and_receiver(db_url) as (edge, rx):
        task_id = await send(edge, rx, "ask colour?\nreply got {answer}")
        asked = await rx.wait_for(lambda p: p.task_id == task_id, within=20)
        assert (asked.state, asked.text) == ("TASK_STATE_INPUT_REQUIRED", "colour?")
        # Interrupted pushes carry their own stable id (the task is not final yet).
        assert asked.message_id is not None and asked.message_id.startswith(f"{task_id}:")
        assert await send(edge, rx, "blue", taskId=task_id) == task_id
        done = await rx.wait_for(lambda p: p.state == "TASK_STATE_COMPLETED", within=20)
        assert done.text == "got blue"


async def test_cancel_stops_pushes(db_url: str) -> None:
    async with edge_and_receiver(db_url) as (edge, rx):
        task_id = await send(edge, rx, "progress one\nsleep 30\nprogress two\nreply never")
        await rx.wait_for(lambda p: p.message_id == f"{task_id}:line-1", within=20)
        canceled = await edge.result("CancelTask", {"id": task_id})
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        # A later task's final proves the deliverer kept running past the canceled one.
        other = await send(edge, rx, "reply later")
        await rx.wait_for(lambda p: p.message_id == f"{other}:final", within=20)
        assert [p.message_id for p in rx.requests if p.task_id == task_id] == [f"{task_id}:line-1"]
