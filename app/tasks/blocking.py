"""Blocking ``SendMessage`` (``configuration.returnImmediately`` false, only for tenants that do
not require a push config): wait until the task is terminal or interrupted, bounded by
``blocking_timeout_seconds``, then answer with the task as it stands.

The turn may run in any process. The wait follows the task's change notifications (the same
``TaskEventWakeups`` the streams use: PostgreSQL ``LISTEN`` on the task-events channel), so it
re-reads the task's state as soon as any process changed it; it also polls, short at first,
then up to half a second, so a lost notification (or SQLite, where nothing is heard) only
delays the answer. The answer after a timeout is simply the task in its current state.
"""

from __future__ import annotations

import asyncio

from app.db.engine import Database
from app.security.caller import CallerScope
from app.tasks import states

SETTLED = states.TERMINAL | states.INTERRUPTED
_FIRST_POLL = 0.02
_MAX_POLL = 0.5


async def wait_settled(
    db: Database, scope: CallerScope, task_id: str, *, limit_seconds: float
) -> str:
    """Return the task's state once settled, or its current state when ``limit_seconds`` pass."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_seconds
    delay = _FIRST_POLL
    # Watch before the first read: a change committed after it wakes the wait.
    wakeup, unwatch = db.signals.task_events.watch(scope.tenant, task_id)
    try:
        while True:
            state = await db.storage.task_lifecycle.state(scope, task_id)
            remaining = deadline - loop.time()
            if state is None or state in SETTLED or remaining <= 0:
                return state or ""
            await wakeup.wait(min(delay, remaining))
            delay = min(delay * 2, _MAX_POLL)
    finally:
        unwatch()
