"""The subtasks store in SQLAlchemy, for both backends (``app.db.subtasks.SubtaskStore``).

Every transition is one guarded ``UPDATE … WHERE status IN (…)``; creating a round inserts
with ``ON CONFLICT DO NOTHING`` on (task, ordinal), the ordinals going on from the earlier
rounds', and reads the round back, so two workers racing on one round end with the rows of
whichever wrote first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from sqlalchemy import func, select, update

from app.db import subtasks as st
from app.db.engine import Database
from app.db.models.subtasks import SubtaskRow
from app.db.subtasks import NewSubtask, Subtask, SubtaskScope


def _subtask(row: Any) -> Subtask:
    return Subtask(
        round=int(row.round),
        ordinal=int(row.ordinal),
        type=row.type,
        prompt=row.prompt,
        params={str(k): str(v) for k, v in dict(row.params or {}).items()},
        status=row.status,
        result=row.result,
        fingerprint=row.fingerprint,
        steps=list(row.steps or []),
    )


class SharedSubtasks:
    """``insert``: the dialect's ``insert`` (it has ``on_conflict_do_nothing``)."""

    def __init__(self, db: Database, insert: Callable[[Any], Any]) -> None:
        self._db = db
        self._insert = insert

    @staticmethod
    def _of(scope: SubtaskScope) -> list[Any]:
        return [
            SubtaskRow.tenant == scope.tenant,
            SubtaskRow.identity == scope.identity,
            SubtaskRow.task_id == scope.task_id,
        ]

    async def round(self, scope: SubtaskScope, round_no: int) -> list[Subtask]:
        query = (
            select(SubtaskRow)
            .where(*self._of(scope), SubtaskRow.round == round_no)
            .order_by(SubtaskRow.ordinal)
        )
        async with self._db.transaction() as session:
            rows = (await session.execute(query)).scalars().all()
        return [_subtask(r) for r in rows]

    async def last_round(self, scope: SubtaskScope) -> int:
        query = select(func.max(SubtaskRow.round)).where(*self._of(scope))
        async with self._db.transaction() as session:
            found = (await session.execute(query)).scalar()
        return int(found or 0)

    async def create_round(
        self, scope: SubtaskScope, round_no: int, subtasks: Sequence[NewSubtask]
    ) -> list[Subtask]:
        existing = await self.round(scope, round_no)
        if existing or not subtasks:
            return existing
        async with self._db.transaction() as session:
            # Ordinals go on from the earlier rounds' (settled before this one is created), so
            # two creators of one round write the same ordinals and the second writes nothing.
            top = select(func.max(SubtaskRow.ordinal)).where(
                *self._of(scope), SubtaskRow.round < round_no
            )
            first = int((await session.execute(top)).scalar() or 0) + 1
            values = [
                {
                    "tenant": scope.tenant,
                    "identity": scope.identity,
                    "task_id": scope.task_id,
                    "round": round_no,
                    "ordinal": first + index,
                    "type": sub.type,
                    "prompt": sub.prompt,
                    "params": dict(sub.params),
                    "status": st.PENDING,
                    "steps": [],
                }
                for index, sub in enumerate(subtasks)
            ]
            statement = (
                self._insert(SubtaskRow)
                .values(values)
                .on_conflict_do_nothing(index_elements=["tenant", "identity", "task_id", "ordinal"])
            )
            await session.execute(statement)
        return await self.round(scope, round_no)

    async def _move(
        self, scope: SubtaskScope, ordinal: int | None, allowed: Collection[str], **values: Any
    ) -> int:
        where = [*self._of(scope), SubtaskRow.status.in_(list(allowed))]
        if ordinal is not None:
            where.append(SubtaskRow.ordinal == ordinal)
        statement = update(SubtaskRow).where(*where).values(updated_at=func.now(), **values)
        async with self._db.transaction() as session:
            done = await session.execute(statement)
        return int(getattr(done, "rowcount", 0) or 0)

    async def start(self, scope: SubtaskScope, ordinal: int, fingerprint: str) -> bool:
        moved = await self._move(
            scope, ordinal, {st.PENDING}, status=st.RUNNING, fingerprint=fingerprint
        )
        return moved == 1

    async def save_steps(
        self, scope: SubtaskScope, ordinal: int, steps: Sequence[dict[str, Any]]
    ) -> bool:
        return await self._move(scope, ordinal, {st.RUNNING}, steps=list(steps)) == 1

    async def complete(self, scope: SubtaskScope, ordinal: int, result: str) -> bool:
        if not result.strip():
            return False  # a completed subtask carries text
        moved = await self._move(scope, ordinal, {st.RUNNING}, status=st.COMPLETED, result=result)
        return moved == 1

    async def fail(self, scope: SubtaskScope, ordinal: int, reason: str) -> bool:
        moved = await self._move(scope, ordinal, st.OPEN, status=st.FAILED, result=reason)
        return moved == 1

    async def skip(self, scope: SubtaskScope, ordinal: int) -> bool:
        return await self._move(scope, ordinal, {st.PENDING}, status=st.SKIPPED) == 1

    async def cancel_open(self, scope: SubtaskScope) -> int:
        return await self._move(scope, None, st.OPEN, status=st.CANCELED)
