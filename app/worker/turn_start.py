"""Starting a turn's attempt: ``begin_attempt``, the task snapshot the turn runs on, and
whether an earlier attempt of the turn answered already (``already_answered``).

The attempt is counted and the turn marked ``running`` before anything else happens (a worker
killed mid-turn leaves a counted attempt behind), then the runner reads the task it is about
to run. Where the store can (PostgreSQL), the two are one statement, and a first attempt also
marks its task working in it: every path of a first attempt whose task may be marked marks it
before anything else (the agent call, or the final failure when the tenant or its agent kind
is gone), and a task that is canceled, terminal or gone is left alone by the guard, as
``mark_working`` leaves it. A retry does not (an earlier attempt may have answered already).
The snapshot is only used when the update applied, so a worker that lost its lease reads
nothing it acts on (``app.db.mailbox.MailboxStore.begin``).
"""

from __future__ import annotations

from app.db.engine import Database
from app.db.mailbox import Begun as Begun
from app.db.mailbox import Lease, QueuedTurn, WorkingMark
from app.tasks.states import RUNNABLE
from app.tasks.turn_writes import working_values
from app.worker.roles import Snapshot


async def begin(db: Database, lease: Lease, turn: QueuedTurn) -> Begun:
    """The attempt begun and the task's snapshot (``Begun``), one unit of work."""
    mark = None
    if turn.attempts == 0:
        state, status, at = working_values()
        mark = WorkingMark(allowed=RUNNABLE, state=state, status=status, at=at)
    return await db.storage.mailbox.begin(lease, turn, mark)


def already_answered(snapshot: Snapshot, turn: QueuedTurn) -> bool:
    """An earlier attempt of this turn wrote its outcome (an agent message after the turn's
    own message) but died before marking the turn ``done``: do not ask or answer twice."""
    if turn.attempts == 0:
        return False
    seen_own = False
    for message in snapshot.history:
        if message.get("messageId") == turn.message_id:
            seen_own = True
        elif seen_own and message.get("role") in ("ROLE_AGENT", "agent"):
            return True
    return False
