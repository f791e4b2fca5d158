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
import json
import logging
from collections.abc import Mapping
from typing import Any

from a2a.types import Artifact, Part

from app.agents.contract import (
    Agent,
    AgentFailure,
    AgentQuestion,
    AgentReply,
    TurnContext,
    TurnStopped,
)
from app.db.mailbox import ERROR_AGENT, ERROR_TIMEOUT
from app.security.caller import PeerSender
from app.tasks import states
from app.tasks.outcome import MESSAGE_RESULT_KEY, TurnOutcome
from app.tasks.wire import normalise
from app.text import first_bad_text
from app.worker.watch import TurnWatch

log = logging.getLogger("looping.worker")


class AgentCrash(Exception):
    """The agent failed (exception, timeout or an invalid result); ``category`` goes to
    ``turns.last_error`` (never the exception text)."""

    def __init__(self, category: str) -> None:
        super().__init__(category)
        self.category = category


async def call_agent(
    agent: Agent,
    ctx: TurnContext,
    watch: TurnWatch,
    *,
    seconds: float,
    message_results: bool = False,
) -> TurnOutcome:
    """Run ``agent`` on ``ctx`` within ``seconds``; ``watch`` can cancel it.
    ``message_results``: the tenant takes Message results (an open tenant, issue 49)."""
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
    if task.cancelled():
        raise TurnStopped
    # Retrieved even when dropped: an agent task's unretrieved exception is logged at ERROR by
    # asyncio when the task is collected (a stop is not an error).
    exc = task.exception()
    if watch.interrupted:
        raise TurnStopped  # whatever the agent produced after the stop signal is dropped
    if isinstance(exc, TurnStopped):
        raise TurnStopped
    if exc is not None:
        log.warning(
            "turn.agent_error", extra={"task_id": ctx.task_id, "outcome": type(exc).__name__}
        )
        raise AgentCrash(ERROR_AGENT)
    return outcome_of(task.result(), message_results=message_results)


async def _cancelled(task: asyncio.Task[Any]) -> None:
    """Cancel the agent's task and wait until it has stopped, whatever it raises then."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


def outcome_of(result: object, *, message_results: bool = False) -> TurnOutcome:
    """The agent's return value as the task's next state; anything else is a crash. A reply
    ``as_message`` keeps the Message-result key only where ``message_results`` (open tenants):
    elsewhere it is a plain reply, so the gateway's final push stays ``<taskId>:final``."""
    if isinstance(result, AgentReply):
        as_message = result.as_message and message_results
        outcome = TurnOutcome(
            state=states.REJECTED if result.rejected else states.COMPLETED,
            text=result.text,
            parts=tuple(result.parts),
            artifacts=tuple(result.artifacts),
            message_key=MESSAGE_RESULT_KEY if as_message else None,
        )
    elif isinstance(result, AgentFailure):
        outcome = TurnOutcome(state=states.FAILED, text=result.text)
    elif isinstance(result, AgentQuestion):
        state = states.AUTH_REQUIRED if result.auth else states.INPUT_REQUIRED
        outcome = TurnOutcome(state=state, text=result.text, parts=tuple(result.parts))
    else:
        log.warning("turn.invalid_agent_result", extra={"outcome": type(result).__name__})
        raise AgentCrash(ERROR_AGENT)
    if not _storable(outcome):
        log.warning("turn.invalid_agent_result", extra={"outcome": type(result).__name__})
        raise AgentCrash(ERROR_AGENT)
    return outcome


def _storable(outcome: TurnOutcome) -> bool:
    """Whether the write of ``outcome`` can succeed: parts and artifacts a2a.proto accepts,
    JSON without NaN, and text without U+0000 or unpaired surrogates (PostgreSQL refuses
    them). Checked here, as the agent's fault: found by audit, such a result failed the write
    itself on every attempt, an internal error, and the task never left WORKING."""
    doc = {"text": outcome.text, "parts": list(outcome.parts), "artifacts": list(outcome.artifacts)}
    try:
        if outcome.text is not None and not isinstance(outcome.text, str):
            return False
        normalise(outcome.parts, Part, "part")
        normalise(outcome.artifacts, Artifact, "artifact")
        json.dumps(doc, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return first_bad_text(doc, "result") is None


def message_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The turn's message from its queued payload (older payloads are the message itself)."""
    message = payload.get("message")
    return dict(message) if isinstance(message, Mapping) else dict(payload)


def identity_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    identity = payload.get("identity")
    return dict(identity) if isinstance(identity, Mapping) else {}


def sender_of(payload: Mapping[str, Any]) -> PeerSender | None:
    """A peer's turn: its sender, as the accept recorded it from the verified token."""
    return PeerSender.from_json(payload.get("peer"))
