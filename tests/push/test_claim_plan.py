"""The PostgreSQL claim reads about ``limit`` rows whatever the backlog (found by audit: after a
receiver outage left ~4,000 due rows, each claim read every pending row once per candidate,
seconds per call behind the one claim lock, and delivery fell to a few pushes a second).

Checked on the plan PostgreSQL actually runs (``EXPLAIN ANALYZE`` row counts, not timings), on
a statement-pool connection (generic plans), before any ``ANALYZE`` of the table."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from app.db.engine import Database
from app.db.postgres.push_outbox import _CLAIM_SQL
from tests.db.helpers import plan_nodes

pytestmark = pytest.mark.postgres

BACKLOG_TASKS = 2000  # two pending rows each (a progress and a final): 4,000 due rows


async def _explain(conn: asyncpg.Connection, limit: int) -> list[dict[str, Any]]:
    await conn.execute("PREPARE claim(int, text, float8) AS " + _CLAIM_SQL)
    claim = conn.transaction()
    await claim.start()
    try:
        doc = await conn.fetchval(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim({limit}, 'probe', 30.0)"
        )
    finally:
        await claim.rollback()  # EXPLAIN ANALYZE ran the claim: keep nothing it leased
    return plan_nodes(json.loads(doc)[0]["Plan"])


async def test_the_claim_reads_about_its_limit_not_the_backlog(pg_database: Database) -> None:
    conn = await asyncpg.connect(**pg_database._read_connect_args())
    try:
        await conn.execute(
            "INSERT INTO push_outbox (tenant, identity, task_id, config_id, message_key,"
            " kind, payload, status, attempts)"
            " SELECT 'demo', 'u' || (g % 20), 't' || g, 'c', k, k, '{}'::jsonb, 'pending', 0"
            f" FROM generate_series(1, {BACKLOG_TASKS}) g,"
            " (VALUES ('line-1'), ('final')) v(k)"
        )
        # Another process has 32 pushes on the wire (its senders' share): their tasks'
        # rows must be skipped without scanning the backlog for them.
        await conn.execute(
            "UPDATE push_outbox SET lease_until = now() + interval '1 minute',"
            " lease_owner = 'other' WHERE message_key = 'line-1' AND id % 125 = 0"
        )
        nodes = await _explain(conn, 16)
    finally:
        await conn.close()
    reads = {
        f"{n['Node Type']} {n.get('Index Name') or n.get('Relation Name')}": n["Actual Rows"]
        * n["Actual Loops"]
        for n in nodes
        if n.get("Relation Name") == "push_outbox" or n.get("Index Name", "").startswith("ix_push")
    }
    # About limit x (a few + the rows on the wire); before the fix, 4,000 x 2,000 (7.3 M).
    assert max(reads.values()) < 1000, reads
    assert any("ix_push_outbox_on_wire" in name for name in reads), reads
    assert not any(name.startswith("Seq Scan") for name in reads), reads
