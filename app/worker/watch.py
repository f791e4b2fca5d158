"""The handle that stops a running turn, shared by the runner, the lease keeper and shutdown.

The lease keeper runs on its own thread and reaches a turn only through this handle (through
the event loop), so the runner's next move after a stop depends only on which flag was set.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from app.security.caller import CallerScope


@dataclass
class TurnWatch:
    """The handle the lease keeper and the shutdown path use to stop a running turn.

    ``stop`` is the agent's cancellation signal (``TurnContext.cancelled``), set for any
    reason; the flags say which one, because the runner's next move depends on it.
    """

    scope: CallerScope
    task_id: str
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    canceled: bool = False  # the task was canceled (CancelTask)
    lost: bool = False  # the lease was taken over: touch nothing
    shutdown: bool = False  # this process is stopping: give the turn back
    agent_task: asyncio.Task[Any] | None = None

    def stop_agent(self, reason: str) -> None:
        if reason == "canceled":
            self.canceled = True
        elif reason == "lost":
            self.lost = True
        elif reason == "shutdown":
            self.shutdown = True
        self.stop.set()
        if self.agent_task is not None and not self.agent_task.done():
            self.agent_task.cancel()

    @property
    def interrupted(self) -> bool:
        return self.stop.is_set()
