"""Subtasks in this process's memory (``app.db.subtasks.SubtaskStore``), for tests and
``agents try``: lost with the process, same transitions as the database's."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.db import subtasks as st
from app.db.subtasks import NewSubtask, Subtask, SubtaskScope


@dataclass
class MemorySubtasks:
    rows: dict[SubtaskScope, list[Subtask]] = field(default_factory=dict)

    async def round(self, scope: SubtaskScope, round_no: int) -> list[Subtask]:
        return [s for s in self.rows.get(scope, []) if s.round == round_no]

    async def last_round(self, scope: SubtaskScope) -> int:
        return max((s.round for s in self.rows.get(scope, [])), default=0)

    async def create_round(
        self, scope: SubtaskScope, round_no: int, subtasks: Sequence[NewSubtask]
    ) -> list[Subtask]:
        existing = await self.round(scope, round_no)
        if existing:
            return existing
        rows = self.rows.setdefault(scope, [])
        first = max((s.ordinal for s in rows if s.round < round_no), default=0) + 1
        for index, sub in enumerate(subtasks):
            rows.append(
                Subtask(
                    round_no, first + index, sub.type, sub.prompt, dict(sub.params),
                    st.PENDING, None, None, [],
                )
            )  # fmt: skip
        return await self.round(scope, round_no)

    def _move(
        self, scope: SubtaskScope, ordinal: int | None, allowed: Collection[str], **values: Any
    ) -> int:
        rows = self.rows.get(scope, [])
        moved = 0
        for index, row in enumerate(rows):
            if (ordinal is None or row.ordinal == ordinal) and row.status in allowed:
                rows[index] = replace(row, **values)
                moved += 1
        return moved

    async def start(self, scope: SubtaskScope, ordinal: int, fingerprint: str) -> bool:
        return (
            self._move(scope, ordinal, {st.PENDING}, status=st.RUNNING, fingerprint=fingerprint)
            == 1
        )

    async def save_steps(
        self, scope: SubtaskScope, ordinal: int, steps: Sequence[dict[str, Any]]
    ) -> bool:
        return self._move(scope, ordinal, {st.RUNNING}, steps=list(steps)) == 1

    async def complete(self, scope: SubtaskScope, ordinal: int, result: str) -> bool:
        if not result.strip():
            return False
        return self._move(scope, ordinal, {st.RUNNING}, status=st.COMPLETED, result=result) == 1

    async def fail(self, scope: SubtaskScope, ordinal: int, reason: str) -> bool:
        return self._move(scope, ordinal, st.OPEN, status=st.FAILED, result=reason) == 1

    async def skip(self, scope: SubtaskScope, ordinal: int) -> bool:
        return self._move(scope, ordinal, {st.PENDING}, status=st.SKIPPED) == 1

    async def cancel_open(self, scope: SubtaskScope) -> int:
        return self._move(scope, None, st.OPEN, status=st.CANCELED)
