"""The values stored in ``tasks.state``, ``turns.status`` and ``turns.kind``.

Task states are the protobuf enum names of ``a2a.types.TaskState`` (CONTRACT §6), stored as-is
so the wire value and the stored value never diverge. Which state may follow which is the
state machine's business (``app.tasks.states``); this module only names the values, so the
schema and the stores can use them without importing the rules.
"""

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

# turns.status values
TURN_QUEUED: Final = "queued"
TURN_RUNNING: Final = "running"
TURN_DONE: Final = "done"
TURN_DEAD: Final = "dead"
TURN_CANCELED: Final = "canceled"
# A turn still to run (the head of an identity's mailbox is its lowest unfinished turn).
UNFINISHED_TURNS: Final = (TURN_QUEUED, TURN_RUNNING)
# The same set as SQL text, written into the statements that look for unfinished turns and into the
# predicate of the partial index ``ix_turns_unfinished``. A query can use a partial index only where
# its own WHERE proves the index's predicate, and a bind parameter proves nothing to a generic plan
# (the statement pool plans once per connection): the claim then walked every turn ever stored, not
# the few still queued. The ORM statements (SQLite) bind them: SQLite searches the mailbox index by
# status instead.
UNFINISHED_TURNS_SQL: Final = "('queued', 'running')"

# turns.kind values
TURN_START: Final = "start"
TURN_RESUME: Final = "resume"
# A steering message for a running llm turn: written done (no worker runs it); the running
# loop reads it from the task's history (app.agents.llm).
TURN_STEER: Final = "steer"
