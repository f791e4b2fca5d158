"""The accept store: a message's turn with its task, as one unit of work (CONTRACT §5).

``AcceptStore`` is the seam between the accept path (``app.tasks.accept``: parsing, keys,
which states a message may continue, the documents) and the backends: the SQLAlchemy
transaction both run (``app.db.shared.accepts``) and PostgreSQL's one-statement new-task
accept (``app.db.postgres.accepts``). Idempotency rests on ``UNIQUE (tenant, identity,
message_id)`` of ``turns``: the turn is inserted first with ``ON CONFLICT DO NOTHING``; no row
back means a retry (or a concurrent twin) already won, and the answer is *its* task.

A new task's turn may be refused when its identity already has ``queued_limit`` unfinished
new-task turns (``QueueFull``; issue 47, row 3): the count covers ``start`` turns only, so
continuations (``resume``) never count and are never refused, and it is taken after the
idempotency decision, so a retry of an accepted message always gets its task. SQLite runs one
writer at a time, so its count is exact; PostgreSQL's exactness is described in
``app.db.postgres.accepts``.

A created turn wakes a worker: this process's after the commit, the others by ``NOTIFY``
inside the unit of work when none of ours has a free slot (``app.db.signals``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from app.attachments.stored import Attachment
from app.db.models import TaskRow
from app.db.push_configs import SealedPush
from app.security.caller import CallerScope


@dataclass(frozen=True)
class NewTurn:
    """The turn a message queues, and the message as the task's history records it."""

    key: str  # turns.message_id: the idempotency key
    message_id: str  # the client's message id, which finds the twin of a retry
    content_hash: str
    payload: dict[str, Any]
    message: dict[str, Any]  # the user's message; the store adds taskId and contextId
    push: SealedPush | None
    # A new task's metadata (a peer's turn: ``looping.peer``, issue 54); a continuation's
    # task keeps the metadata it was created with.
    task_metadata: dict[str, Any] = field(default_factory=dict)
    # Kept with the turn in the same unit of work (``turn_attachments``, issue 55); the
    # message carries their descriptions.
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class Submission:
    """The state an accepted task is (back) in, with its status document."""

    state: str
    status: dict[str, Any]
    at: datetime


@dataclass(frozen=True)
class Accepted:
    task: TaskRow
    created: bool  # False: an earlier identical message already holds this turn


class QueueFull(Exception):
    """The identity already has ``limit`` unfinished new-task turns: nothing was written."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} unfinished new-task turns")
        self.limit = limit


# Why a continuation is refused, from the task's id and its state.
Refusal = Callable[[str, str], Exception]


class AcceptStore(Protocol):
    async def twin(self, scope: CallerScope, message_id: str, content_hash: str) -> Accepted | None:
        """The task of the message already accepted under ``message_id`` (``created`` False),
        ``InvalidParams`` if its content differs, None if there is none: lets a message whose
        acceptance costs work (reading a document) skip it on a retry."""
        ...

    async def start(
        self,
        scope: CallerScope,
        turn: NewTurn,
        *,
        task_id: str,
        context_id: str,
        submission: Submission,
        queued_limit: int | None = None,
    ) -> Accepted:
        """A new task ``task_id`` with its first turn, history message, push config and actor
        row; or, when the key is taken, the task of the message that took it
        (``InvalidParams`` if that message's content differs). With ``queued_limit``,
        ``QueueFull`` (nothing written) when the identity's unfinished ``start`` turns would
        exceed it."""
        ...

    async def resume(
        self,
        scope: CallerScope,
        turn: NewTurn,
        *,
        task_id: str,
        context_id: str | None,
        resumable: frozenset[str],
        submission: Submission,
        refuse: Refusal,
    ) -> Accepted:
        """A ``resume`` turn for ``task_id``, moving the task from a ``resumable`` state to
        ``submission`` by compare-and-set; ``TaskNotFound`` outside the scope,
        ``InvalidParams`` for another ``context_id``, ``refuse(task id, state)`` raised when
        the task is in no resumable state."""
        ...

    async def steer(
        self,
        scope: CallerScope,
        turn: NewTurn,
        *,
        task_id: str,
        context_id: str | None,
        steerable: frozenset[str],
        submission: Submission,
        refuse: Refusal,
    ) -> Accepted:
        """A message joining ``task_id`` while it runs (an llm agent's steering): its turn
        row is written ``done`` (the idempotency key; no worker runs it) and the message goes
        into the task's history, the state untouched; ``refuse(task id, state)`` raised when
        the task is in no ``steerable`` state. Errors as ``resume``."""
        ...
