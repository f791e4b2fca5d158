"""Delegating rounds against the real-HTTP fake model: three subtasks run by subagents at
once, then the reply; the repair, fallback and policy-failure paths; the last round offers
only ``final_reply``; a retried turn runs nothing twice."""

from __future__ import annotations

import json

from pydantic_ai.messages import ModelRequest, UserPromptPart

from app.agents.contract import AgentFailure, AgentReply
from app.agents.llm.agent import LlmAgent
from app.agents.llm.delegation.memory import MemorySubtasks
from app.agents.llm.plugins import build_plugins
from app.agents.llm.session import MemorySessions, entry_of
from app.db import subtasks as st
from app.db.subtasks import SubtaskScope
from app.testing.fake_model import FakeModelServer, text, tool_call
from tests.agents.helpers import Recorder
from tests.agents.llm.delegation.kit import (
    RESEARCH_PROMPT,
    config,
    delegate,
    final,
)
from tests.agents.llm.kit import runtime, turn

SCOPE = SubtaskScope("demo", "user-1", "t-1")


async def lookup(q: str) -> str:
    """Look q up."""
    return f"found {q}"


class _Plugin:
    key = "lookups"
    tools = (lookup,)


async def test_three_subtasks_at_once_then_the_reply(fake: FakeModelServer) -> None:
    fake.script(
        delegate("a", "b", "c"),
        text("result", delay=1.0),
        text("result", delay=1.0),
        text("result", delay=1.0),
        final("All three done"),
    )
    progress = Recorder()
    store = MemorySubtasks()
    rt = runtime(plugins=build_plugins([_Plugin()], {}), subtasks=store)
    result = await LlmAgent.from_config(config(fake), rt).run(turn("go", progress=progress))
    assert result == AgentReply(text="All three done")
    assert len(fake.requests) == 5
    subagents = fake.requests[1:4]
    # Concurrent: every subagent's request arrived before the first one was answered.
    assert max(r.at for r in subagents) - min(r.at for r in subagents) < 0.9
    for request in subagents:
        assert request.tool_names == ["lookup"]  # the recipe's tool; "nope" was dropped
        system, user = request.messages[0], request.messages[1]
        assert system["role"] == "system" and system["content"].startswith(RESEARCH_PROMPT)
        assert "You are the host agent." not in json.dumps(request.messages)
        assert user["role"] == "user" and user["content"].split("\n")[0] in {"a", "b", "c"}
        assert len(request.messages) == 2  # its own transcript, nothing of the host's
    main = fake.requests[0]
    assert sorted(main.tool_names) == ["ask_user", "delegate", "final_reply"]
    assert (
        "CONTRACT: call one tool; types: research; summarize; at most 8."
        in (main.messages[0]["content"])
    )
    results = fake.requests[4].messages[-1]
    assert results["role"] == "tool" and results["tool_call_id"] == "d1"
    assert [r["status"] for r in json.loads(results["content"])] == ["completed"] * 3
    keys = [k for k, _ in progress.steps]
    assert keys[0] == "round-1:ack" and progress.steps[0][1] == "Looking into it"
    assert sorted(keys[1:]) == sorted(
        [f"subtask-{n}:{e}" for n in (1, 2, 3) for e in ("start", "end")]
    )
    rows = await store.round(SCOPE, 1)
    assert [(r.ordinal, r.status) for r in rows] == [(n, st.COMPLETED) for n in (1, 2, 3)]
    assert all(r.fingerprint and len(r.fingerprint) == 64 for r in rows)


async def test_a_subagent_uses_its_tools_and_answers_in_text(fake: FakeModelServer) -> None:
    fake.script(
        delegate("one"),
        tool_call("lookup", {"q": "x"}, call_id="s1"),
        text("x was found"),
        final("done"),
    )
    store = MemorySubtasks()
    rt = runtime(plugins=build_plugins([_Plugin()], {}), subtasks=store)
    assert await LlmAgent.from_config(config(fake), rt).run(turn("go")) == AgentReply(text="done")
    assert fake.requests[2].messages[-1] == {
        "role": "tool",
        "tool_call_id": "s1",
        "content": "found x",
    }
    row = (await store.round(SCOPE, 1))[0]
    assert row.result == "x was found" and len(row.steps) == 2


async def test_prose_is_repaired_on_the_same_model(fake: FakeModelServer) -> None:
    fake.script(
        text("I think the answer is 4"),
        tool_call("final_reply", {"text": ""}, call_id="x"),
        final("4"),
    )
    result = await LlmAgent.from_config(config(fake), runtime()).run(turn("2+2?"))
    assert result == AgentReply(text="4")
    second, third = fake.requests[1].messages, fake.requests[2].messages
    assert second[-1]["role"] == "user" and "not in prose" in second[-1]["content"]
    assert third[-1]["role"] == "tool" and "non-empty 'text'" in third[-1]["content"]


async def test_after_the_repairs_the_fallback_model_answers(fake: FakeModelServer) -> None:
    with FakeModelServer() as fallback:
        fake.script(*[text("prose")] * 4)  # the first answer and three repairs
        fallback.script(final("from the fallback"))
        result = await LlmAgent.from_config(config(fake, fallback), runtime()).run(turn("q"))
        assert result == AgentReply(text="from the fallback")
        assert len(fake.requests) == 4 and len(fallback.requests) == 1
        # The fallback gets the round's own messages, not the failed attempts.
        assert fallback.requests[0].messages == fake.requests[0].messages


async def test_then_the_policy_failure_text(fake: FakeModelServer) -> None:
    with FakeModelServer() as fallback:
        fake.script(*[tool_call("delegate", {"reply": "x", "subtasks": []})] * 4)
        fallback.script(tool_call("other", {}))
        result = await LlmAgent.from_config(config(fake, fallback), runtime()).run(turn("q"))
    assert result == AgentFailure("POLICY FAILURE TEXT")
    assert "1 to 8 subtasks" in fake.requests[1].messages[-1]["content"]


async def test_the_last_round_offers_only_final_reply(fake: FakeModelServer) -> None:
    fake.script(delegate("a"), text("r"), delegate("b"), text("r"), final("done"))
    rt = runtime(subtasks=MemorySubtasks())
    progress = Recorder()
    doc = config(fake, max_rounds=3)
    result = await LlmAgent.from_config(doc, rt).run(turn("q", progress=progress))
    assert result == AgentReply(text="done")
    mains = [fake.requests[i] for i in (0, 2, 4)]
    assert [sorted(r.tool_names) for r in mains] == [
        ["ask_user", "delegate", "final_reply"],
        ["ask_user", "delegate", "final_reply"],
        ["final_reply"],
    ]
    assert "FINAL: reply now (of 3 rounds)." in mains[2].messages[0]["content"]
    assert "FINAL" not in mains[1].messages[0]["content"]
    assert ("round-2:ack", "Looking into it") in progress.steps


async def test_a_failed_subtask_brings_the_partial_note(fake: FakeModelServer) -> None:
    fake.script(delegate("a", kind="summarize"), text(""), final("partial answer"))
    result = await LlmAgent.from_config(config(fake), runtime()).run(turn("q"))
    assert result == AgentReply(text="partial answer")
    content = fake.requests[2].messages[-1]["content"]
    assert content.endswith("PARTIAL NOTE") and '"status": "failed"' in content


async def test_a_retried_turn_runs_nothing_twice(fake: FakeModelServer) -> None:
    fake.script(delegate("a", "b"), text("r1"), text("r2"), final("done"))
    store, sessions = MemorySubtasks(), MemorySessions()
    rt = runtime(subtasks=store, sessions=sessions)
    agent = LlmAgent.from_config(config(fake), rt)
    assert await agent.run(turn("q")) == AgentReply(text="done")
    progress = Recorder()
    assert await agent.run(turn("q", progress=progress)) == AgentReply(text="done")
    assert len(fake.requests) == 4 and progress.steps == []
    assert [e.id for e in sessions.transcript("demo", "user-1").items] == [
        "task:t-1:user:m-1",
        "task:t-1:round:1:ack",
        "task:t-1:round:1:results",
        "task:t-1:reply:final",
    ]


async def test_the_session_is_compacted_before_a_round(fake: FakeModelServer) -> None:
    sessions = MemorySessions()
    transcript = sessions.transcript("demo", "user-1")
    for n in range(6):
        request = ModelRequest(parts=[UserPromptPart("older question " + "x" * 1000)])
        await transcript.append(entry_of(f"task:old-{n}:user:m", request))
    fake.script(text("they asked six old questions"), final("ok"))
    doc = {**config(fake), "session_max_tokens": 1000}
    rt = runtime(sessions=sessions)
    assert await LlmAgent.from_config(doc, rt).run(turn("q")) == AgentReply(text="ok")
    assert fake.requests[0].tool_names == []  # the summary call
    assert "Summary of the earlier conversation" in json.dumps(fake.requests[1].messages)
    ids = [e.id for e in transcript.items]
    assert ids[0].startswith("summary:")
    assert sum(i.startswith("task:old-") for i in ids) < 6  # the oldest tasks went


class _Gate:
    key = "gate"

    def should_handle_turn(self, ctx: object) -> bool:
        return False


async def test_a_plugin_gate_declines_the_turn(fake: FakeModelServer) -> None:
    rt = runtime(plugins=build_plugins([_Gate()], {}))
    assert await LlmAgent.from_config(config(fake), rt).run(turn("q")) == AgentReply()
    assert fake.requests == []


async def test_a_long_result_is_cut_for_the_host(fake: FakeModelServer) -> None:
    fake.script(delegate("a"), text("y" * 2000), final("ok"))
    doc = {**config(fake), "max_tool_output_bytes": 256}
    assert await LlmAgent.from_config(doc, runtime()).run(turn("q")) == AgentReply(text="ok")
    result = json.loads(fake.requests[2].messages[-1]["content"])[0]["result"]
    assert result.startswith("y" * 256) and "[output cut: the first 256 of 2000 bytes" in result
