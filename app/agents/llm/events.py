"""The loop's typed events and the bus that delivers them.

Progress pushes, metrics and (later) streaming subscribe here instead of reaching into the
loop. Subscribers are awaited in the order they subscribed; one that raises is logged and the
loop goes on (an observer never ends a turn), except ``TurnStopped`` from the progress
subscriber, which stops the turn as any refused write does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.agents.contract import TurnStopped

log = logging.getLogger("looping.agent")


@dataclass(frozen=True)
class TurnStarted:
    task_id: str
    resumed: bool


@dataclass(frozen=True)
class TurnEnded:
    task_id: str
    outcome: str  # completed | question | failed | gated | stopped


@dataclass(frozen=True)
class ModelCalled:
    """One HTTP call to a model (retries are separate calls)."""

    model: str
    outcome: str  # ok | retry | failed | timeout
    tokens_in: int = 0
    tokens_out: int = 0
    fallback: bool = False


@dataclass(frozen=True)
class ModelResponded:
    """A step's answer, saved: ``step`` is the task's step number ``n``."""

    task_id: str
    step: int
    tool_names: tuple[str, ...]
    text: str | None


@dataclass(frozen=True)
class ToolStarted:
    task_id: str
    call_id: str
    tool: str


@dataclass(frozen=True)
class ToolEnded:
    task_id: str
    call_id: str
    tool: str
    step: int
    outcome: str  # ok | error | blocked | unknown | bad_arguments | timeout
    result: str


LoopEvent = TurnStarted | TurnEnded | ModelCalled | ModelResponded | ToolStarted | ToolEnded
Subscriber = Callable[[LoopEvent], Awaitable[None]]


class EventBus:
    def __init__(self, *subscribers: Subscriber) -> None:
        self._subscribers: list[Subscriber] = list(subscribers)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    async def emit(self, event: LoopEvent) -> None:
        for subscriber in self._subscribers:
            try:
                await subscriber(event)
            except TurnStopped:
                raise  # the progress subscriber's write was refused: the turn must stop
            except Exception as exc:
                log.warning(
                    "agent.subscriber_failed",
                    extra={"event": type(event).__name__, "outcome": type(exc).__name__},
                )
