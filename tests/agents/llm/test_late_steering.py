"""A steering message that arrives after the loop's last look at the task's history and before
the turn's outcome is written (issue 48, point 8) reaches the model: the completion is refused
while the history holds a message the agent has not seen, the agent runs again from its saved
steps, takes the message and answers again. Through the real edge and worker, both backends."""

from __future__ import annotations

from typing import Any

from app.agents.llm import hitl
from app.agents.llm.events import LoopEvent, TurnEnded
from app.agents.llm.plugins import build_plugins
from app.agents.llm.runtime import LlmRuntime
from app.agents.registry import default_registry
from app.db.engine import Database
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.fake_model import FakeModelServer, text
from tests.polling import poll_until

FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01}


class SteerAtTheEnd:
    """Sends one steering message for the task when its first run ends, that is after the
    loop's last look at the history and before the worker writes the outcome."""

    def __init__(self) -> None:
        self.edge: EdgeHarness | None = None
        self.sent: dict[str, Any] | None = None

    async def __call__(self, event: LoopEvent) -> None:
        if isinstance(event, TurnEnded) and event.outcome == "completed" and self.sent is None:
            assert self.edge is not None
            message = {
                "messageId": "m-late",
                "role": "ROLE_USER",
                "taskId": event.task_id,
                "parts": [{"text": "and make it green"}],
            }
            params = {"message": message, "configuration": {"returnImmediately": True}}
            self.sent = await self.edge.result("SendMessage", params)


async def test_a_late_steering_message_reaches_the_model(db_url: str) -> None:
    steer = SteerAtTheEnd()
    db = Database(db_url)
    runtime = LlmRuntime(
        environ={},
        failure_text="failed",
        plugins=build_plugins([], {}, builtins=[hitl.ASK_USER_TOOL]),
        sessions=db.storage.sessions,
        subscribers=(steer,),
    )
    with FakeModelServer() as fake:
        fake.script(text("Painted it red."), text("Painted it green."))
        config = {"model": {"base_url": fake.base_url, "name": "fake"}, "system_prompt": "x"}
        agents = default_registry(runtime)
        async with edge_harness(db_url, background=True, agents=agents, **FAST) as edge:
            steer.edge = edge
            await edge.add_tenant(
                "demo", agent="llm", agent_config=config, require_push_config=False
            )
            message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "paint"}]}
            params = {"message": message, "configuration": {"returnImmediately": True}}
            sent = await edge.result("SendMessage", params)
            task_id = sent["task"]["id"]

            async def settled() -> dict[str, Any] | None:
                task = await edge.result("GetTask", {"id": task_id})
                done = task["status"]["state"] == "TASK_STATE_COMPLETED"
                return task if done else None

            task = await poll_until(settled, timeout=20)
            sessions = edge.services.db.storage.sessions
            entries = await sessions.transcript("demo", edge.identity["key"]).entries()
    await db.dispose()

    assert steer.sent is not None and steer.sent["task"]["id"] == task_id  # accepted
    assert task["status"]["message"]["parts"][0]["text"] == "Painted it green."
    assert len(fake.requests) == 2
    last = [(m["role"], m.get("content")) for m in fake.requests[1].messages[1:]]
    assert last == [
        ("user", "paint"),
        ("assistant", "Painted it red."),
        ("user", "and make it green"),
    ]
    prefix = f"task:{task_id}:"
    assert [e.id.removeprefix(prefix) for e in entries] == [
        "user:m-1",
        "reply:final",
        "user:m-late",
        "step:1",
    ]
    roles = [m["role"] for m in task["history"]]
    assert roles == ["ROLE_USER", "ROLE_USER", "ROLE_AGENT"]
