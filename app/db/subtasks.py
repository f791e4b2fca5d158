"""The subtasks store (``llm`` agents with delegation): one row per subtask a round of a task
delegated, read and written in the task's caller scope (tenant, identity).

Ordinals count across a task's rounds from 1 (a subtask's id is its ordinal). Transitions are
guarded writes that apply only from the states named: pending -> running -> completed | failed
| canceled, pending -> failed | skipped | canceled. Creating a round's subtasks is idempotent on
(task, round): a second call returns the rows the first one wrote. ``SubtaskStore`` is the
role; ``app.db.shared.subtasks`` plays it on SQLite, ``app.db.postgres.subtasks`` on
PostgreSQL (one statement per transition), chosen in ``app.db.storage``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

JsonDict = dict[str, Any]

PENDING = "pending"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
CANCELED = "canceled"
SKIPPED = "skipped"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELED, SKIPPED})
OPEN = frozenset({PENDING, RUNNING})


@dataclass(frozen=True)
class SubtaskScope:
    tenant: str
    identity: str
    task_id: str


@dataclass(frozen=True)
class NewSubtask:
    type: str
    prompt: str
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Subtask:
    round: int
    ordinal: int
    type: str
    prompt: str
    params: Mapping[str, str]
    status: str
    result: str | None
    fingerprint: str | None
    steps: Sequence[JsonDict]  # the subagent's saved transcript (model messages as JSON)


class SubtaskStore(Protocol):
    async def create_round(
        self, scope: SubtaskScope, round_no: int, subtasks: Sequence[NewSubtask]
    ) -> list[Subtask]:
        """The round's rows, written now or by an earlier call (then ``subtasks`` is ignored)."""
        ...

    async def round(self, scope: SubtaskScope, round_no: int) -> list[Subtask]:
        """The round's rows in ordinal order (empty: the round delegated nothing yet)."""
        ...

    async def last_round(self, scope: SubtaskScope) -> int:
        """The highest round with rows (0: none)."""
        ...

    async def start(self, scope: SubtaskScope, ordinal: int, fingerprint: str) -> bool:
        """pending -> running, recording the request's fingerprint."""
        ...

    async def save_steps(
        self, scope: SubtaskScope, ordinal: int, steps: Sequence[JsonDict]
    ) -> bool:
        """A running subtask's transcript so far (replaces the saved one)."""
        ...

    async def complete(self, scope: SubtaskScope, ordinal: int, result: str) -> bool:
        """running -> completed with a non-blank result."""
        ...

    async def fail(self, scope: SubtaskScope, ordinal: int, reason: str) -> bool:
        """pending | running -> failed."""
        ...

    async def skip(self, scope: SubtaskScope, ordinal: int) -> bool:
        """pending -> skipped."""
        ...

    async def cancel_open(self, scope: SubtaskScope) -> int:
        """Every pending or running subtask of the task -> canceled; how many."""
        ...
