"""Subagents taken over: a running subtask resumes from its saved steps, a request whose
fingerprint differs from the one it started under is refused, and the fingerprint leaves out
the date line and the model ids."""

from __future__ import annotations

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart

from app.agents.contract import AgentReply
from app.agents.llm.agent import LlmAgent
from app.agents.llm.config import parse_llm_config
from app.agents.llm.delegation.fingerprint import canonical_request, fingerprint
from app.agents.llm.delegation.memory import MemorySubtasks
from app.agents.llm.delegation.subagent import dump
from app.agents.llm.delegation.subtasks import MISMATCH
from app.agents.llm.plugins import build_plugins
from app.agents.llm.session import MemorySessions, entry_of
from app.db import subtasks as st
from app.db.subtasks import NewSubtask, SubtaskScope
from app.testing.fake_model import FakeModelServer, text
from tests.agents.llm.delegation.kit import config, final
from tests.agents.llm.kit import runtime, turn

SCOPE = SubtaskScope("demo", "user-1", "t-1")
CALLS: list[str] = []


async def lookup(q: str) -> str:
    """Look q up."""
    CALLS.append(q)
    return f"found {q}"


class _Plugin:
    key = "lookups"
    tools = (lookup,)


def _recipe(fake: FakeModelServer, **change: object) -> object:
    doc = config(fake)
    doc["delegation"]["recipes"][0].update(change)
    delegation = parse_llm_config(doc).delegation
    assert delegation is not None
    return delegation.recipes[0]


def test_the_fingerprint_leaves_out_models_and_covers_the_request(fake: FakeModelServer) -> None:
    recipe = _recipe(fake)
    same = fingerprint("t", 1, recipe, "p", {"b": "2", "a": "1"})  # type: ignore[arg-type]
    assert same == fingerprint("t", 1, recipe, "p", {"a": "1", "b": "2"})  # type: ignore[arg-type]
    assert len(same) == 64
    canonical = canonical_request("t", 1, recipe, "p", {})  # type: ignore[arg-type]
    assert "main-model" not in canonical and "Current date" not in canonical
    for other in (
        fingerprint("t", 2, recipe, "p", {}),  # type: ignore[arg-type]
        fingerprint("t", 1, recipe, "q", {}),  # type: ignore[arg-type]
        fingerprint("t", 1, _recipe(fake, version=2), "p", {}),  # type: ignore[arg-type]
    ):
        assert other != fingerprint("t", 1, recipe, "p", {})  # type: ignore[arg-type]


async def _taken_over(fake: FakeModelServer, store: MemorySubtasks, fp: str) -> MemorySessions:
    """A run that died mid-round: the ack saved, subtask 1 running with a saved model step
    asking for ``lookup`` (no result yet)."""
    sessions = MemorySessions()
    transcript = sessions.transcript("demo", "user-1")
    await transcript.append(entry_of("task:t-1:user:m-1", ModelRequest([UserPromptPart("go")])))
    args = {"reply": "on it", "subtasks": [{"type": "research", "prompt": "one"}]}
    call = ToolCallPart("delegate", args, "d1")
    await transcript.append(entry_of("task:t-1:round:1:ack", ModelResponse(parts=[call])))
    await store.create_round(SCOPE, 1, [NewSubtask("research", "one")])
    await store.start(SCOPE, 1, fp)
    step = ModelResponse(parts=[ToolCallPart("lookup", {"q": "saved"}, "s1")])
    await store.save_steps(SCOPE, 1, dump([step]))
    return sessions


async def test_a_running_subtask_resumes_from_its_saved_steps(fake: FakeModelServer) -> None:
    CALLS.clear()
    store = MemorySubtasks()
    fp = fingerprint("t-1", 1, _recipe(fake), "one", {})  # type: ignore[arg-type]
    sessions = await _taken_over(fake, store, fp)
    fake.script(text("resumed answer"), final("done"))
    rt = runtime(plugins=build_plugins([_Plugin()], {}), subtasks=store, sessions=sessions)
    assert await LlmAgent.from_config(config(fake), rt).run(turn("go")) == AgentReply(text="done")
    assert CALLS == ["saved"]  # the saved call's tool ran; its model step was not asked again
    first = fake.requests[0].messages
    assert first[-1] == {"role": "tool", "tool_call_id": "s1", "content": "found saved"}
    row = (await store.round(SCOPE, 1))[0]
    assert (row.status, row.result) == (st.COMPLETED, "resumed answer")


async def test_a_different_request_under_the_same_id_is_refused(fake: FakeModelServer) -> None:
    store = MemorySubtasks()
    sessions = await _taken_over(fake, store, "0" * 64)  # started under another request
    fake.script(final("done anyway"))
    rt = runtime(subtasks=store, sessions=sessions)
    result = await LlmAgent.from_config(config(fake), rt).run(turn("go"))
    assert result == AgentReply(text="done anyway")
    row = (await store.round(SCOPE, 1))[0]
    assert (row.status, row.result) == (st.FAILED, MISMATCH)
    assert len(fake.requests) == 1  # only the host's round 2: the subagent was not run
    assert "request fingerprint mismatch" in fake.requests[0].messages[-1]["content"]
