"""The worker's search for due turns reads the turns still to run, not every turn stored (found
by measuring: with the unfinished statuses bound as a parameter, PostgreSQL's generic plans
could not use the partial index ``ix_turns_unfinished``; the claim walked the whole ``turns``
table and grew with the history kept).

Checked on the plans the databases actually choose: PostgreSQL's on a statement-pool
connection (generic plans), before and after ``ANALYZE``, by ``EXPLAIN ANALYZE`` row counts,
not timings; SQLite's by ``EXPLAIN QUERY PLAN`` of the statements the ORM path sends."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event, insert

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import ActorRow, TurnRow
from app.db.postgres import mailbox as pg_mailbox
from app.tasks import states
from tests.db.helpers import plan_nodes

IDENTITIES = 100
FINISHED_PER_IDENTITY = 100  # 10,000 finished turns: the history the search must not read
QUEUED = 20  # identities with a turn to run; five of them have a second one behind it


def test_the_sql_text_and_the_index_name_the_unfinished_statuses() -> None:
    # One set, three spellings: the tuple the code compares with, the SQL text the statements
    # carry, and the partial index's predicate (the model; migration 0002 wrote the same).
    quoted = ", ".join(f"'{status}'" for status in states.UNFINISHED_TURNS)
    assert f"({quoted})" == states.UNFINISHED_TURNS_SQL
    (index,) = [ix for ix in TurnRow.__table__.indexes if ix.name == "ix_turns_unfinished"]
    for dialect in ("postgresql", "sqlite"):
        where = str(index.dialect_options[dialect]["where"])
        assert where == f"status IN {states.UNFINISHED_TURNS_SQL}"


def _turn_reads(nodes: list[dict[str, Any]]) -> dict[str, float]:
    """Rows each plan node touching ``turns`` read: returned plus filtered out, all loops."""
    reads: dict[str, float] = {}
    for n in nodes:
        index = n.get("Index Name", "")
        if n.get("Relation Name") != "turns" and not index.startswith(("ix_turns", "uq_turns")):
            continue
        name = f"{n['Node Type']} {n.get('Index Name') or n.get('Relation Name')} {n.get('Alias')}"
        seen = n["Actual Rows"] + n.get("Rows Removed by Filter", 0)
        reads[name] = reads.get(name, 0) + seen * n["Actual Loops"]
    return reads


_SEED_PG = f"""
INSERT INTO actors (tenant, identity, fence, updated_at)
SELECT 'demo', 'u' || g, 1, now() FROM generate_series(1, {IDENTITIES}) g;
INSERT INTO turns (tenant, identity, message_id, task_id, kind, status, attempts,
                   content_hash, payload)
SELECT 'demo', 'u' || (g % {IDENTITIES} + 1), 'done-' || g, 't' || g, 'start', 'done', 1,
       'h', '{{}}'::jsonb
  FROM generate_series(1, {IDENTITIES * FINISHED_PER_IDENTITY}) g;
INSERT INTO turns (tenant, identity, message_id, task_id, kind, status, attempts,
                   content_hash, payload)
SELECT 'demo', 'u' || g, 'next-' || g, 'n' || g, 'start', 'queued', 0, 'h', '{{}}'::jsonb
  FROM generate_series(1, {QUEUED}) g;
INSERT INTO turns (tenant, identity, message_id, task_id, kind, status, attempts,
                   content_hash, payload)
SELECT 'demo', 'u' || g, 'later-' || g, 'l' || g, 'start', 'queued', 0, 'h', '{{}}'::jsonb
  FROM generate_series(1, 5) g;
"""


async def _explain(conn: asyncpg.Connection, name: str, call: str) -> dict[str, float]:
    txn = conn.transaction()
    await txn.start()
    try:
        doc = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}{call}")
    finally:
        await txn.rollback()  # EXPLAIN ANALYZE ran the claim: keep nothing it leased
    return _turn_reads(plan_nodes(json.loads(doc)[0]["Plan"]))


def _check(reads: dict[str, float]) -> None:
    # Of the order of the 25 unfinished turns (a plan made on stale statistics may read them
    # once per candidate: 608 rows seen), never the 10,000 finished ones; before the fix,
    # 20,858 rows: every stored turn, twice.
    assert sum(reads.values()) < 2000, reads
    assert not any(name.startswith("Seq Scan") for name in reads), reads
    assert any("ix_turns_unfinished" in name for name in reads), reads
    # No other index of turns (the mailbox index, the message-id key) walks an identity's history.
    assert not any(("ix_turns_mailbox" in n or "uq_turns" in n) for n in reads), reads


@pytest.mark.postgres
async def test_the_claim_and_the_head_read_walk_the_unfinished_turns_only(
    pg_database: Database,
) -> None:
    conn = await asyncpg.connect(**pg_database._read_connect_args())
    try:
        await conn.execute(_SEED_PG)
        await conn.execute(
            "PREPARE claim(text, float8, int) AS " + pg_mailbox._CLAIM_WITH_HEADS_SQL
        )
        await conn.execute("PREPARE head(text, text) AS " + pg_mailbox._HEAD_SQL)
        for analyzed in (False, True):
            if analyzed:
                await conn.execute("ANALYZE turns; ANALYZE actors")
                await conn.execute("DEALLOCATE claim; DEALLOCATE head")
                await conn.execute(
                    "PREPARE claim(text, float8, int) AS " + pg_mailbox._CLAIM_WITH_HEADS_SQL
                )
                await conn.execute("PREPARE head(text, text) AS " + pg_mailbox._HEAD_SQL)
            _check(await _explain(conn, "claim", "('probe', 30.0, 8)"))
            _check(await _explain(conn, "head", "('demo', 'u3')"))
    finally:
        await conn.close()


IDLE_ACTORS = 20_000  # identities with nothing queued: the claim must not read them
_SEED_IDLE_PG = f"""
INSERT INTO actors (tenant, identity, fence, updated_at)
SELECT 'idle', 'i' || g, 1, now() FROM generate_series(1, {IDLE_ACTORS}) g;
UPDATE actors SET lease_owner = 'other', lease_until = now() + interval '1 hour'
 WHERE tenant = 'demo' AND identity IN ('u1', 'u2', 'u3');
"""


def _actor_reads(nodes: list[dict[str, Any]]) -> dict[str, float]:
    """Rows each plan node reading ``actors`` saw (returned plus filtered out, all loops)."""
    reads: dict[str, float] = {}
    for n in nodes:
        if n.get("Relation Name") != "actors" or n["Node Type"] == "ModifyTable":
            continue
        name = f"{n['Node Type']} {n.get('Index Name') or ''} {n.get('Alias')}"
        seen = n["Actual Rows"] + n.get("Rows Removed by Filter", 0)
        reads[name] = reads.get(name, 0) + seen * n["Actual Loops"]
    return reads


@pytest.mark.postgres
async def test_the_fair_claim_reads_the_waiting_identities_not_every_actor(
    pg_database: Database,
) -> None:
    """The fair claim (tenants' live leases, last-served order) reads one index entry of
    ``turns`` per waiting identity, those identities' actors by key and the live leases:
    never the identities that have nothing queued."""
    conn = await asyncpg.connect(**pg_database._read_connect_args())
    try:
        await conn.execute(_SEED_PG + _SEED_IDLE_PG)
        for analyzed in (False, True):
            if analyzed:
                await conn.execute("ANALYZE turns; ANALYZE actors; DEALLOCATE claim")
            await conn.execute(
                "PREPARE claim(text, float8, int) AS " + pg_mailbox._CLAIM_WITH_HEADS_SQL
            )
            txn = conn.transaction()
            await txn.start()
            try:
                doc = await conn.fetchval(
                    "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim('p', 30.0, 8)"
                )
            finally:
                await txn.rollback()
            nodes = plan_nodes(json.loads(doc)[0]["Plan"])
            actors = _actor_reads(nodes)
            # A few reads per waiting identity and live lease, never one per stored actor.
            assert sum(actors.values()) < 500, actors
            assert not any(name.startswith("Seq Scan") for name in actors), actors
            turns = _turn_reads(nodes)
            assert sum(turns.values()) < 200, turns  # one head entry per waiting identity
            assert not any(name.startswith("Seq Scan") for name in turns), turns
    finally:
        await conn.close()


def test_the_orm_claim_and_head_read_use_the_partial_index_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "edge.db"
    url = f"sqlite+aiosqlite:///{path}"
    upgrade_to_head(url)
    sent = asyncio.run(_claim_and_head(url))
    assert len(sent) == 2, [s for s, _ in sent]
    with sqlite3.connect(path) as conn:
        for statement, params in sent:
            plan = [row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + statement, params)]
            on_turns = [line for line in plan if " turns" in line]
            assert on_turns, plan
            # Each read of turns is bounded by status: the partial index, or the mailbox
            # index searched with status=? (one probe per unfinished status).
            bounded = [ln for ln in on_turns if "ix_turns_unfinished" in ln or "status=?" in ln]
            assert bounded == on_turns, "\n".join(plan)


async def _claim_and_head(url: str) -> list[tuple[str, Any]]:
    """The statements touching ``turns`` that the ORM claim and head read send."""
    db = Database(url)
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        if "turns" in statement and statement.lstrip().upper().startswith(("SELECT", "UPDATE")):
            sent.append((statement, params))

    try:
        async with db.transaction() as s:
            await s.execute(insert(ActorRow), _actors())
            await s.execute(insert(TurnRow), _turns())
        event.listen(db.engine.sync_engine, "before_cursor_execute", record)
        (lease,) = await db.storage.mailbox.claim(owner="probe", limit=1, lease_seconds=30.0)
        assert await db.storage.mailbox.head_turn(lease) is not None
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", record)
        await db.dispose()
    return sent


def _actors() -> list[dict[str, Any]]:
    return [{"tenant": "demo", "identity": f"u{i}", "fence": 1} for i in range(1, IDENTITIES + 1)]


def _turns() -> list[dict[str, Any]]:
    def turn(identity: int, key: str, status: str) -> dict[str, Any]:
        return {
            "tenant": "demo",
            "identity": f"u{identity}",
            "message_id": key,
            "task_id": f"t-{key}",
            "kind": states.TURN_START,
            "status": status,
            "attempts": 0,
            "content_hash": "h",
            "payload": {},
        }

    rows = [
        turn(n % IDENTITIES + 1, f"done-{n}", states.TURN_DONE)
        for n in range(IDENTITIES * FINISHED_PER_IDENTITY)
    ]
    rows += [turn(n, f"next-{n}", states.TURN_QUEUED) for n in range(1, QUEUED + 1)]
    return rows
