"""The task state machine (CONTRACT §6): which states a turn may leave, write and end in.

The stored values themselves (task states, turn statuses and kinds) are named in
``app.db.states`` and re-exported here, so the rules and their values read as one module.
"""

from __future__ import annotations

from typing import Final

from app.db.states import (
    AUTH_REQUIRED as AUTH_REQUIRED,
)
from app.db.states import (
    CANCELED as CANCELED,
)
from app.db.states import (
    COMPLETED as COMPLETED,
)
from app.db.states import (
    FAILED as FAILED,
)
from app.db.states import (
    INPUT_REQUIRED as INPUT_REQUIRED,
)
from app.db.states import (
    REJECTED as REJECTED,
)
from app.db.states import (
    SUBMITTED as SUBMITTED,
)
from app.db.states import (
    TURN_CANCELED as TURN_CANCELED,
)
from app.db.states import (
    TURN_DEAD as TURN_DEAD,
)
from app.db.states import (
    TURN_DONE as TURN_DONE,
)
from app.db.states import (
    TURN_QUEUED as TURN_QUEUED,
)
from app.db.states import (
    TURN_RESUME as TURN_RESUME,
)
from app.db.states import (
    TURN_RUNNING as TURN_RUNNING,
)
from app.db.states import (
    TURN_START as TURN_START,
)
from app.db.states import (
    UNFINISHED_TURNS as UNFINISHED_TURNS,
)
from app.db.states import (
    UNFINISHED_TURNS_SQL as UNFINISHED_TURNS_SQL,
)
from app.db.states import (
    WORKING as WORKING,
)

TERMINAL: Final[frozenset[str]] = frozenset({COMPLETED, FAILED, CANCELED, REJECTED})
# A2A: the agent stopped to ask; a SendMessage carrying the taskId resumes it.
INTERRUPTED: Final[frozenset[str]] = frozenset({INPUT_REQUIRED, AUTH_REQUIRED})
# States ``mark_working`` may leave (a re-run after a crash finds the task WORKING already).
RUNNABLE: Final[frozenset[str]] = frozenset({SUBMITTED, WORKING, INPUT_REQUIRED, AUTH_REQUIRED})
# What a turn's progress and outcome writes require (the host's final FAILED excepted).
WORKING_ONLY: Final[frozenset[str]] = frozenset({WORKING})
# What a turn may end in (``TurnWrites.finish``); CANCELED is only ever written by CancelTask.
OUTCOMES: Final[frozenset[str]] = frozenset(
    {COMPLETED, FAILED, REJECTED, INPUT_REQUIRED, AUTH_REQUIRED}
)


def is_terminal(state: str) -> bool:
    return state in TERMINAL
