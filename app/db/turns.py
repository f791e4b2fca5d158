"""The turn-writes store: the guarded task writes a running turn makes, and their values.

``TurnWriteStore`` is the seam between the state machine (``app.tasks.turn_writes``, which
decides which states a write may leave and composes the documents it writes) and the two
backends (``app.db.postgres.turn_writes``: one statement each on the statement pool;
``app.db.shared.turn_writes``: the SQLAlchemy transactions SQLite runs). Each operation is one
unit of work whose change is a single compare-and-set under the turn's fence
(``app.db.fence``); its result says whether it applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.db.fence import Fence
from app.security.caller import CallerScope


@dataclass(frozen=True)
class KnownTask:
    """What the runner knows of its task without reading it again: the snapshot it ran on
    and the version its own applied writes moved it to. ``finish`` writes with it directly;
    the write's own guards (version, history position, state, fence) refuse it if anything
    else changed the task since, and ``finish`` then reads and writes as usual."""

    version: int
    next_seq: int  # the history position of the agent's message (messages are numbered 1..n)
    context_id: str
    artifacts: list[Any]


@dataclass(frozen=True)
class QueuedTurn:
    id: int
    task_id: str
    message_id: str
    kind: str
    status: str
    attempts: int
    payload: dict[str, Any]


@dataclass(frozen=True)
class SettleTurn:
    """The worker's turn to settle in the statement that writes its outcome."""

    turn_id: int
    status: str  # done | dead
    error: str | None = None


@dataclass(frozen=True)
class Finished:
    """``finish``'s verdict. ``settled``: the turn was settled by the same statement, and
    ``next_head`` is the identity's next due turn as it read it (None: none is due);
    otherwise the caller settles the turn itself."""

    applied: bool
    settled: bool = False
    next_head: QueuedTurn | None = None
    # Refused by ``OutcomeRule.seen_history``: the history holds a message the agent never
    # saw (a steering message that came after its last look); run the agent again.
    unseen: bool = False


REFUSED = Finished(applied=False)
UNSEEN = Finished(applied=False, unseen=True)


@dataclass(frozen=True)
class TaskSnapshot:
    """What a turn needs to run: the task (protobuf-JSON, full history), its state."""

    task: dict[str, Any]
    history: list[dict[str, Any]]
    state: str
    context_id: str
    version: int  # tasks.version when read: every task write bumps it

    @classmethod
    def of(cls, task: dict[str, Any], state: str, version: int) -> TaskSnapshot:
        """From the protobuf-JSON task with its whole history."""
        history = list(task.get("history", []))
        context_id = str(task["contextId"])
        return cls(task, history, state, context_id, version)

    def known(self, version: int) -> KnownTask:
        """What ``finish`` may write on without reading the task again, if the task is at
        ``version`` (this snapshot's plus the runner's own applied writes, which change
        neither the history nor the artifacts)."""
        artifacts = list(self.task.get("artifacts", []))
        return KnownTask(version, len(self.history) + 1, self.context_id, artifacts)


@dataclass(frozen=True)
class Progress:
    """A progress write: the task's new status and the push payload reporting it."""

    status: dict[str, Any]
    at: datetime
    key: str  # the push's message key
    push: dict[str, Any]
    trace: dict[str, str] | None = None  # the writing turn's trace context, kept with the push


@dataclass(frozen=True)
class OutcomeWrite:
    """An outcome write, composed by the state machine from the task as read."""

    state: str
    status: dict[str, Any]
    at: datetime
    artifacts: list[Any]
    message: dict[str, Any] | None  # the agent's message appended to the history
    key: str  # its message key, and the final push's
    push: dict[str, Any]
    trace: dict[str, str] | None = None  # the writing turn's trace context, kept with the push


@dataclass(frozen=True)
class OutcomeRule:
    """Where ``finish`` may write ``state`` from. ``replay``: finding ``state`` stored already
    counts as applied (a terminal state written by an earlier run of the same turn)."""

    state: str
    allowed: frozenset[str]
    replay: bool
    # How many history messages the agent has read (None: no such guard). With it, a task
    # whose history holds more is refused with ``Finished.unseen`` (issue 48: a steering
    # message accepted after the loop's last look must reach the model, not be dropped).
    seen_history: int | None = None

    def unseen(self, next_seq: int) -> bool:
        """Whether a history whose next position is ``next_seq`` holds unseen messages."""
        return self.seen_history is not None and next_seq > self.seen_history + 1


class ComposeProgress(Protocol):
    def __call__(self, context_id: str) -> Progress: ...


class ComposeOutcome(Protocol):
    def __call__(self, basis: KnownTask) -> OutcomeWrite: ...


class TurnWriteStore(Protocol):
    async def mark_working(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        *,
        allowed: frozenset[str],
        state: str,
        status: dict[str, Any],
        at: datetime,
    ) -> bool:
        """Move the task from ``allowed`` to ``state``; False: refused (canceled, terminal,
        or the fence was lost)."""
        ...

    async def record_progress(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        *,
        allowed: frozenset[str],
        compose: ComposeProgress,
        context_id: str | None = None,
    ) -> bool:
        """Write a progress status and queue its push, one unit of work. ``context_id``: the
        task's, when the caller knows it (it never changes), so a store can compose and write
        without reading the task first; a store that writes on it refuses a task whose
        context id differs."""
        ...

    async def finish(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        rule: OutcomeRule,
        compose: ComposeOutcome,
        known: KnownTask | None = None,
        settle: SettleTurn | None = None,
    ) -> Finished:
        """Write an outcome, its agent message and its final push, one unit of work; where
        the backend can, settle ``settle`` and read the identity's next turn in it too."""
        ...

    async def snapshot(self, scope: CallerScope, task_id: str) -> TaskSnapshot | None:
        """The task with its whole history; None if not found in ``scope``."""
        ...
