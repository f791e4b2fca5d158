"""The subtasks store on PostgreSQL (``app.db.subtasks.SubtaskStore``): the reads and the
guarded transitions every subtask makes (start, its saved steps, its outcome) as one statement
each on the statement pool; creating a round and cancel through the SQLAlchemy store."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from app.db import subtasks as st
from app.db.shared.subtasks import SharedSubtasks
from app.db.statement_pool import StatementPool
from app.db.subtasks import NewSubtask, Subtask, SubtaskScope

_ROUND_SQL = """
SELECT round, ordinal, type, prompt, params::text AS params, status, result, fingerprint,
       steps::text AS steps
  FROM subtasks
 WHERE tenant = $1 AND identity = $2 AND task_id = $3 AND round = $4
 ORDER BY ordinal
"""

_MOVE_SQL = """
UPDATE subtasks
   SET status = COALESCE($6, status), result = COALESCE($7, result),
       fingerprint = COALESCE($8, fingerprint), steps = COALESCE($9::jsonb, steps),
       updated_at = now()
 WHERE tenant = $1 AND identity = $2 AND task_id = $3 AND ordinal = $4
   AND status = ANY($5::text[])
RETURNING 1
"""


def _subtask(row: Any) -> Subtask:
    return Subtask(
        round=row["round"],
        ordinal=row["ordinal"],
        type=row["type"],
        prompt=row["prompt"],
        params={str(k): str(v) for k, v in json.loads(row["params"]).items()},
        status=row["status"],
        result=row["result"],
        fingerprint=row["fingerprint"],
        steps=json.loads(row["steps"]),
    )


class PostgresSubtasks:
    def __init__(self, pool: StatementPool, shared: SharedSubtasks) -> None:
        self._pool = pool
        self._shared = shared

    async def round(self, scope: SubtaskScope, round_no: int) -> list[Subtask]:
        rows = await self._pool.fetch(
            _ROUND_SQL, scope.tenant, scope.identity, scope.task_id, round_no
        )
        return [_subtask(r) for r in rows]

    async def last_round(self, scope: SubtaskScope) -> int:
        return await self._shared.last_round(scope)

    async def create_round(
        self, scope: SubtaskScope, round_no: int, subtasks: Sequence[NewSubtask]
    ) -> list[Subtask]:
        return await self._shared.create_round(scope, round_no, subtasks)

    async def _move(
        self,
        scope: SubtaskScope,
        ordinal: int,
        allowed: Collection[str],
        *,
        status: str | None = None,
        result: str | None = None,
        fingerprint: str | None = None,
        steps: Sequence[dict[str, Any]] | None = None,
    ) -> bool:
        doc = None if steps is None else json.dumps(list(steps), separators=(",", ":"))
        moved = await self._pool.fetchval(
            _MOVE_SQL,
            scope.tenant,
            scope.identity,
            scope.task_id,
            ordinal,
            sorted(allowed),
            status,
            result,
            fingerprint,
            doc,
        )
        return moved is not None

    async def start(self, scope: SubtaskScope, ordinal: int, fingerprint: str) -> bool:
        return await self._move(
            scope, ordinal, {st.PENDING}, status=st.RUNNING, fingerprint=fingerprint
        )

    async def save_steps(
        self, scope: SubtaskScope, ordinal: int, steps: Sequence[dict[str, Any]]
    ) -> bool:
        return await self._move(scope, ordinal, {st.RUNNING}, steps=steps)

    async def complete(self, scope: SubtaskScope, ordinal: int, result: str) -> bool:
        if not result.strip():
            return False
        return await self._move(scope, ordinal, {st.RUNNING}, status=st.COMPLETED, result=result)

    async def fail(self, scope: SubtaskScope, ordinal: int, reason: str) -> bool:
        return await self._move(scope, ordinal, st.OPEN, status=st.FAILED, result=reason)

    async def skip(self, scope: SubtaskScope, ordinal: int) -> bool:
        return await self._move(scope, ordinal, {st.PENDING}, status=st.SKIPPED)

    async def cancel_open(self, scope: SubtaskScope) -> int:
        return await self._shared.cancel_open(scope)
