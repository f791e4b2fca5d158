"""``ListTasks`` on PostgreSQL as one statement whose pieces are spliced into the answer.

Why: through the ORM a page of 50 tasks cost several times this path's edge CPU:
two statements in a transaction, an ORM object per row, three ``jsonb`` decodes per row, a
``task_doc`` dict per row and the whole page encoded again, with enough garbage for the cyclic
collector to run about once per request. Here one autocommit statement on the statement pool
returns the page's stored values as PostgreSQL's JSON text (``TASK_COLUMNS_SQL``, the pieces
GetTask uses) plus the total, and the edge joins strings. SQLite keeps the shared path
(``app.db.shared.task_reads``), and the tests hold the two to the same documents.

Same rules as the ORM path: scope (tenant AND identity) first in every WHERE, the same
filters, ``totalSize`` counted over the filters without the cursor, newest first by
``(created_at, id)`` with the keyset cursor compared as a row value (never OFFSET), one row
more than the page to know whether another page follows.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from app.db.cursor import encode_cursor
from app.db.documents import RawJson
from app.db.list_query import ListQuery
from app.db.postgres.batched_reads import TASK_COLUMNS_SQL, task_text
from app.security.caller import CallerScope


class ListRunner(Protocol):
    """What runs the statement: ``app.db.statement_pool.StatementPool``."""

    async def fetch(self, query: str, *args: Any) -> Sequence[Any]: ...


@functools.cache
def list_sql(context: bool, state: bool, after: bool, cursor: bool) -> str:
    """The statement for one combination of filters (at most 16, each prepared once per
    connection by asyncpg): a filter that is absent is left out of the SQL rather than
    written as ``$n IS NULL OR …``, so each combination gets a plan for what it filters on.

    $1 tenant, $2 identity, $3 rows to read (page size + 1), $4 history length, $5 whether
    artifacts are included; then, in this order and only when present: context id, state,
    updated after, cursor time and id. Only placeholders are numbered here; no value is ever
    formatted into the SQL.
    """
    where = ["t.tenant = $1", "t.identity = $2"]
    placeholders = iter(range(6, 12))
    if context:
        where.append(f"t.context_id = ${next(placeholders)}")
    if state:
        where.append(f"t.state = ${next(placeholders)}")
    if after:
        where.append(f"t.updated_at > ${next(placeholders)}")
    counted = " AND ".join(where)
    if cursor:
        stamp, task_id = next(placeholders), next(placeholders)
        where.append(f"(t.created_at, t.id) < (${stamp}::timestamptz, ${task_id}::text)")
    columns = TASK_COLUMNS_SQL.replace("@TENANT", "$1").replace("@LIMIT", "$4")
    return f"""
WITH page AS (
  SELECT t.id, t.context_id, t.status,
         CASE WHEN $5::bool THEN t.artifacts ELSE '[]'::jsonb END AS artifacts,
         t.metadata, t.created_at
    FROM tasks t
   WHERE {" AND ".join(where)}
   ORDER BY t.created_at DESC, t.id DESC
   LIMIT $3
), total AS (
  SELECT count(*) AS n FROM tasks t WHERE {counted}
)
SELECT total.n, t.created_at, {columns}
  FROM total LEFT JOIN page t ON true
 ORDER BY t.created_at DESC, t.id DESC
"""  # noqa: S608 (constant fragments and placeholder numbers only)


async def list_page(
    runner: ListRunner,
    scope: CallerScope,
    query: ListQuery,
    cursor: tuple[datetime, str] | None,
) -> RawJson:
    """The ListTasks result as JSON text, keys in the ORM path's order. ``query`` is
    validated and its page token decoded into ``cursor`` by ``TaskQueries.list_wire``."""
    # An empty context id or state filters nothing, as in the ORM path's ``_filters``.
    context_id, state = query.context_id or None, query.state or None
    args: list[Any] = [
        scope.tenant,
        scope.identity,
        query.page_size + 1,
        query.history_length,
        query.include_artifacts,
    ]
    args += [v for v in (context_id, state, query.status_after) if v is not None]
    if cursor is not None:
        args += list(cursor)
    sql = list_sql(
        context_id is not None,
        state is not None,
        query.status_after is not None,
        cursor is not None,
    )
    rows = await runner.fetch(sql, *args)
    total = int(rows[0][0])
    found = [row for row in rows if row[2] is not None]  # an empty page is one row of NULLs
    more = len(found) > query.page_size
    found = found[: query.page_size]
    token = encode_cursor(found[-1][1], found[-1][2]) if more else ""
    tasks = ",".join(task_text(row[2:]) for row in found)
    return RawJson(
        f'{{"tasks":[{tasks}],"nextPageToken":{json.dumps(token)},'
        f'"pageSize":{query.page_size},"totalSize":{total}}}'
    )
