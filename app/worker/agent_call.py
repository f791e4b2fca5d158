"""Calling a tenant's agent for one turn: its own asyncio task, the turn timeout, the stop
signal, and the agent's result turned into a ``TurnOutcome``.

An agent is the tenant's code: whatever it raises or returns, the runner sees one of three
things here: an outcome, ``TurnStopped`` (the turn was stopped: drop what the agent made), or
``AgentCrash`` with a category for ``turns.last_error`` (never the exception's text, which may
carry the tenant's data; CONTRACT §6).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from app.agents.contract import (
    Agent,
    AgentFailure,
    AgentQuestion,
    AgentReply,
    TurnContext,
    TurnStopped,
)
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.worker.mailbox import ERROR_AGENT, ERROR_TIMEOUT
from app.worker.watch import TurnWatch

log = logging.getLogger("looping.worker")


class AgentCrash(Exception):
    """The agent failed (exception, timeout or an invalid result); ``category`` goes to
    ``turns.last_error`` (never the exception text)."""

    def __init__(self, category: str) -> None:
        super().__init__(category)
        self.category = category


async def call_agent(
    agent: Agent, ctx: TurnContext, watch: TurnWatch, *, seconds: float
) -> TurnOutcome:
    """Run ``agent`` on ``ctx`` within ``seconds``; ``watch`` can cancel it."""
    task = asyncio.create_task(agent.run(ctx), name=f"agent:{ctx.task_id}")
    watch.agent_task = task
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        await _cancelled(task)
        raise
    finally:
        watch.agent_task = None
    if not done:
        await _cancelled(task)
        if watch.interrupted:
            raise TurnStopped
        raise AgentCrash(ERROR_TIMEOUT)
    if task.cancelled() or watch.interrupted:
        raise TurnStopped  # whatever the agent produced after the stop signal is dropped
    exc = task.exception()
    if isinstance(exc, TurnStopped):
        raise TurnStopped
    if exc is not None:
        log.warning(
            "turn.agent_error", extra={"task_id": ctx.task_id, "outcome": type(exc).__name__}
        )
        raise AgentCrash(ERROR_AGENT)
    return outcome_of(task.result())


async def _cancelled(task: asyncio.Task[Any]) -> None:
    """Cancel the agent's task and wait until it has stopped, whatever it raises then."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


def outcome_of(result: object) -> TurnOutcome:
    """The agent's return value as the task's next state; anything else is a crash."""
    if isinstance(result, AgentReply):
        return TurnOutcome(
            state=states.COMPLETED,
            text=result.text,
            parts=tuple(result.parts),
            artifacts=tuple(result.artifacts),
        )
    if isinstance(result, AgentFailure):
        return TurnOutcome(state=states.FAILED, text=result.text)
    if isinstance(result, AgentQuestion):
        state = states.AUTH_REQUIRED if result.auth else states.INPUT_REQUIRED
        return TurnOutcome(state=state, text=result.text)
    log.warning("turn.invalid_agent_result", extra={"outcome": type(result).__name__})
    raise AgentCrash(ERROR_AGENT)


def message_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The turn's message from its queued payload (older payloads are the message itself)."""
    message = payload.get("message")
    return dict(message) if isinstance(message, Mapping) else dict(payload)


def identity_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    identity = payload.get("identity")
    return dict(identity) if isinstance(identity, Mapping) else {}
