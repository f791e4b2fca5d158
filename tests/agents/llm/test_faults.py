"""Issue 48, "Bad input and faults", through the real edge and worker on both backends: the
model server down fails the task with the operator's text, written once.

Where each fault of that list is tested:

- model server down: ``test_model_calls`` (the agent's outcome) and here (the task);
- slow: ``test_model_calls::test_a_slow_model_times_out_and_is_retried``;
- garbage, empty ``choices``: ``test_model_calls::test_garbage_bodies_count_as_failed_attempts``;
- unknown tool, arguments that are not JSON:
  ``test_loop::test_bad_calls_go_back_to_the_model_in_fixed_wording``;
- a tool hanging past its timeout: ``test_loop::test_a_tool_past_its_timeout_is_an_error_result``;
- a 50 MB tool output: ``test_loop::test_a_50_mb_output_is_cut_and_says_so``;
- a session over its budget: ``test_compaction`` (both stores);
- an answer to a task not waiting, two answers at once:
  ``test_gateway_turn::test_answers_that_are_not_pending_are_refused``.
"""

from __future__ import annotations

from typing import Any

from app.agents.llm import hitl
from app.agents.llm.plugins import build_plugins
from app.agents.llm.runtime import LlmRuntime
from app.agents.registry import default_registry
from app.db.engine import Database
from app.testing.edge import edge_harness
from app.testing.fake_model import FakeModelServer
from tests.agents.llm.kit import no_sleep
from tests.polling import poll_until

OPERATOR_TEXT = "The assistant is unavailable; try again later."
FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01}


async def test_the_model_server_down_fails_the_task_with_the_operators_text(db_url: str) -> None:
    db = Database(db_url)
    runtime = LlmRuntime(
        environ={},
        failure_text=OPERATOR_TEXT,
        plugins=build_plugins([], {}, builtins=[hitl.ASK_USER_TOOL]),
        sessions=db.storage.sessions,
        sleep=no_sleep,  # the backoff between attempts
    )
    with FakeModelServer() as gone:
        pass  # its port is closed now: every call is refused
    config = {
        "model": {"base_url": gone.base_url, "name": "fake"},
        "system_prompt": "x",
        "model_attempts": 2,
    }
    agents = default_registry(runtime)
    async with edge_harness(db_url, background=True, agents=agents, **FAST) as edge:
        await edge.add_tenant("demo", agent="llm", agent_config=config, require_push_config=False)
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
        params = {"message": message, "configuration": {"returnImmediately": True}}
        task_id = (await edge.result("SendMessage", params))["task"]["id"]

        async def failed() -> dict[str, Any] | None:
            task = await edge.result("GetTask", {"id": task_id})
            return task if task["status"]["state"] == "TASK_STATE_FAILED" else None

        task = await poll_until(failed, timeout=20)
        entries = await db.storage.sessions.transcript("demo", edge.identity["key"]).entries()
    await db.dispose()
    assert task["status"]["message"]["parts"] == [{"text": OPERATOR_TEXT}]
    assert [m["role"] for m in task["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    # The turn's message is in the session once; no answer was saved.
    assert [e.id for e in entries] == [f"task:{task_id}:user:m-1"]
