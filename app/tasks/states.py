"""Task states (CONTRACT §6): the protobuf enum names of ``a2a.types.TaskState``, stored as-is
in ``tasks.state`` so the wire value and the stored value never diverge."""

from __future__ import annotations

from typing import Final

SUBMITTED: Final = "TASK_STATE_SUBMITTED"
WORKING: Final = "TASK_STATE_WORKING"
INPUT_REQUIRED: Final = "TASK_STATE_INPUT_REQUIRED"
AUTH_REQUIRED: Final = "TASK_STATE_AUTH_REQUIRED"
COMPLETED: Final = "TASK_STATE_COMPLETED"
FAILED: Final = "TASK_STATE_FAILED"
CANCELED: Final = "TASK_STATE_CANCELED"
REJECTED: Final = "TASK_STATE_REJECTED"

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

# turns.status values (shared with the worker)
TURN_QUEUED: Final = "queued"
TURN_RUNNING: Final = "running"
TURN_DONE: Final = "done"
TURN_DEAD: Final = "dead"
TURN_CANCELED: Final = "canceled"
# A turn still to run (the head of an identity's mailbox is its lowest unfinished turn).
UNFINISHED_TURNS: Final = (TURN_QUEUED, TURN_RUNNING)
# The same set as SQL text, written into the statements that look for unfinished turns and
# into the predicate of the partial index ``ix_turns_unfinished``. A query can use a partial
# index only where its own WHERE proves the index's predicate, and a bind parameter proves
# nothing to a generic plan (the statement pool plans once per connection): the claim then
# walked every turn ever stored, not the few still queued (bench/ROUNDS.md, round thirty-six:
# 78 ms a claim with 100,000 finished turns, 0.4 ms with the literal). The ORM statements
# (SQLite) bind them: SQLite searches the mailbox index by status instead.
UNFINISHED_TURNS_SQL: Final = "('queued', 'running')"

# turns.kind values
TURN_START: Final = "start"
TURN_RESUME: Final = "resume"


def is_terminal(state: str) -> bool:
    return state in TERMINAL
