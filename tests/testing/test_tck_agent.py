"""The agent the TCK expects (app.testing.tck_agent): the scenario a message id names."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from app.agents.contract import AgentFailure, AgentQuestion, AgentReply, TurnContext
from app.testing.tck_agent import build, scenario_for


def _ctx(message_id: str, steps: list[tuple[str, str]]) -> TurnContext:
    async def progress(key: str, text: str) -> None:
        steps.append((key, text))

    message: dict[str, Any] = {"role": "ROLE_USER", "parts": [], "messageId": message_id}
    return TurnContext(
        tenant="tck", identity_key="tck", identity={}, task_id="t", context_id="c",
        kind="start", message=message, history=(), resume_answer=None, attempt=1,
        cancelled=asyncio.Event(), progress_fn=progress, clock=time.time,
    )  # fmt: skip


def test_each_prefix_names_its_scenario():
    assert scenario_for("tck-complete-task-abc").result == AgentReply("Hello from TCK")
    assert isinstance(scenario_for("tck-input-required-abc").result, AgentQuestion)
    assert scenario_for("tck-message-response-1").result.as_message  # type: ignore[union-attr]
    assert isinstance(scenario_for("tck-reject-task-1").result, AgentFailure)
    url = scenario_for("tck-artifact-file-url-1").result
    assert isinstance(url, AgentReply)
    assert url.artifacts[0]["parts"][0]["url"] == "https://example.com/output.txt"
    raw = scenario_for("tck-artifact-file-1").result
    assert isinstance(raw, AgentReply) and raw.artifacts[0]["parts"][0]["filename"] == "output.txt"
    assert scenario_for("tck-stream-001-x").working
    assert scenario_for("whatever") == scenario_for("whatever")
    other = scenario_for("whatever").result
    assert isinstance(other, AgentReply) and other.text == "Unhandled messageId prefix: whatever"


async def test_a_streaming_scenario_works_first_and_the_resubscribe_one_lingers():
    steps: list[tuple[str, str]] = []
    result = await build({}).run(_ctx("tck-stream-ordering-001-s", steps))
    assert steps == [("working", "working")]
    assert isinstance(result, AgentReply) and result.artifacts
    started = time.monotonic()
    await build({"streaming_timeout": 0.05}).run(_ctx("test-resubscribe-message-id", steps))
    assert time.monotonic() - started >= 0.1


def test_a_bad_streaming_timeout_is_refused():
    for bad in (-1, "2", True):
        with pytest.raises(ValueError, match="streaming_timeout"):
            build({"streaming_timeout": bad})
