"""Calling the agent: its result, its failures and its stop, as the runner sees them."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from app.agents.contract import (
    AgentFailure,
    AgentQuestion,
    AgentReply,
    AgentResult,
    TurnContext,
    TurnStopped,
)
from app.db.mailbox import ERROR_AGENT, ERROR_TIMEOUT
from app.security.caller import CallerScope
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.worker.agent_call import AgentCrash, call_agent, identity_of, message_of, outcome_of
from app.worker.watch import TurnWatch

SECRET = "tenant-secret-in-the-exception"


class _Agent:
    def __init__(self, body: Callable[[TurnContext], Awaitable[Any]]) -> None:
        self._body = body

    async def run(self, ctx: TurnContext) -> AgentResult:
        result: AgentResult = await self._body(ctx)
        return result


def _ctx(stop: asyncio.Event) -> TurnContext:
    async def progress(_key: str, _text: str) -> None:
        return None

    return TurnContext(
        tenant="acme",
        identity_key="u1",
        identity={},
        task_id="task-1",
        context_id="ctx-1",
        kind=states.TURN_START,
        message={"parts": [{"text": "hi"}]},
        history=[],
        resume_answer=None,
        attempt=1,
        cancelled=stop,
        progress_fn=progress,
        clock=lambda: 0.0,
    )


def _watch() -> TurnWatch:
    return TurnWatch(scope=CallerScope(tenant="acme", identity="u1"), task_id="task-1")


async def _call(
    body: Callable[[TurnContext], Awaitable[Any]], watch: TurnWatch, seconds: float
) -> TurnOutcome:
    return await call_agent(_Agent(body), _ctx(watch.stop), watch, seconds=seconds)


async def test_a_reply_becomes_a_completed_outcome_and_the_handle_is_released() -> None:
    watch = _watch()

    async def body(_: TurnContext) -> AgentResult:
        assert watch.agent_task is not None  # the keeper can cancel it while it runs
        return AgentReply(text="done", artifacts=({"artifactId": "a"},))

    outcome = await _call(body, watch, 5)
    assert (outcome.state, outcome.text) == (states.COMPLETED, "done")
    assert outcome.artifacts == ({"artifactId": "a"},)
    assert watch.agent_task is None


async def test_an_agent_exception_is_a_crash_whose_category_never_carries_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body(_: TurnContext) -> AgentResult:
        raise RuntimeError(SECRET)

    with caplog.at_level(logging.WARNING), pytest.raises(AgentCrash) as info:
        await _call(body, _watch(), 5)
    assert info.value.category == ERROR_AGENT
    assert SECRET not in str(info.value)
    assert SECRET not in caplog.text


async def test_an_agent_past_its_time_is_cancelled_and_counted_as_a_timeout() -> None:
    cancelled = asyncio.Event()

    async def body(_: TurnContext) -> AgentResult:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return AgentReply(text="late")

    with pytest.raises(AgentCrash) as info:
        await _call(body, _watch(), 0.05)
    assert info.value.category == ERROR_TIMEOUT
    assert cancelled.is_set()  # the agent's task was stopped, not left running


async def test_a_stopped_turn_drops_what_the_agent_returns_after_the_stop() -> None:
    watch = _watch()

    async def body(_: TurnContext) -> AgentResult:
        watch.stop_agent("canceled")  # the keeper saw a CancelTask while the agent ran
        return AgentReply(text="should be dropped")

    with pytest.raises(TurnStopped):
        await _call(body, watch, 5)
    assert watch.canceled


async def test_the_keeper_cancelling_the_agent_stops_the_turn() -> None:
    watch = _watch()
    started = asyncio.Event()

    async def body(_: TurnContext) -> AgentResult:
        started.set()
        await asyncio.sleep(60)
        return AgentReply(text="never")

    call = asyncio.create_task(_call(body, watch, 30))
    await started.wait()
    watch.stop_agent("lost")
    with pytest.raises(TurnStopped):
        await asyncio.wait_for(call, timeout=5)
    assert watch.lost


async def test_an_agent_raising_turn_stopped_stops_the_turn() -> None:
    async def body(_: TurnContext) -> AgentResult:
        raise TurnStopped

    with pytest.raises(TurnStopped):
        await _call(body, _watch(), 5)


@pytest.mark.parametrize(
    ("result", "state"),
    [
        (AgentReply(text="ok"), states.COMPLETED),
        (AgentFailure(text="no"), states.FAILED),
        (AgentQuestion(text="which?"), states.INPUT_REQUIRED),
        (AgentQuestion(text="sign in", auth=True), states.AUTH_REQUIRED),
    ],
)
def test_each_agent_result_maps_to_its_task_state(result: AgentResult, state: str) -> None:
    assert outcome_of(result).state == state


def test_anything_else_an_agent_returns_is_a_crash() -> None:
    with pytest.raises(AgentCrash) as info:
        outcome_of({"text": "a dict is not a result"})
    assert info.value.category == ERROR_AGENT


def test_the_message_and_identity_come_from_the_queued_payload() -> None:
    payload = {"message": {"messageId": "m1"}, "identity": {"sub": "U1"}}
    assert message_of(payload) == {"messageId": "m1"}
    assert identity_of(payload) == {"sub": "U1"}
    # A payload of an older shape is the message itself and carries no identity.
    assert message_of({"messageId": "m2"}) == {"messageId": "m2"}
    assert identity_of({"messageId": "m2"}) == {}


@pytest.mark.parametrize(
    "result",
    [
        AgentReply(text="nul \x00 here"),
        AgentReply(text="lone \ud800"),
        AgentFailure(text="\udfff"),
        AgentQuestion(text="a\x00"),
        AgentReply(parts=({"data": {"x": float("nan")}},)),
        AgentReply(parts=({"data": {"k\x00": 1}},)),
        AgentReply(parts=({"nonsense": 1},)),
        AgentReply(artifacts=({"artifactId": "a", "parts": [{"text": "\ud800"}]},)),
        AgentReply(artifacts=({"artifactId": "a", "parts": "not a list"},)),
        AgentReply(text=5),  # type: ignore[arg-type]
        AgentReply(parts=({"data": {"when": object()}},)),
    ],
)
def test_a_result_the_task_cannot_store_is_the_agents_crash(result: AgentResult) -> None:
    # Found by audit: such results failed the terminal write itself (PostgreSQL refuses
    # U+0000, unpaired surrogates and NaN), every attempt, and the task stayed WORKING.
    with pytest.raises(AgentCrash) as crash:
        outcome_of(result)
    assert crash.value.category == ERROR_AGENT


def test_ordinary_text_parts_and_artifacts_pass_the_storable_check() -> None:
    reply = AgentReply(
        text="emoji 😀 and \t tabs\n",
        parts=({"data": {"n": 1.5, "list": [1, "two", None]}},),
        artifacts=({"artifactId": "a-1", "parts": [{"text": "x"}]},),
    )
    assert outcome_of(reply).state == states.COMPLETED


async def test_an_agent_stopped_after_the_stop_signal_logs_no_unretrieved_exception() -> None:
    # A lease lost while the agent writes progress: the write is refused (TurnStopped inside
    # the agent) and the stop signal is set. The agent task's exception must be retrieved, or
    # asyncio logs "Task exception was never retrieved" at ERROR when it is collected.
    watch = _watch()

    async def body(_ctx: TurnContext) -> AgentResult:
        watch.stop.set()
        raise TurnStopped

    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        with pytest.raises(TurnStopped):
            await call_agent(_Agent(body), _ctx(watch.stop), watch, seconds=5)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert reported == []
