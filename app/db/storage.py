"""The storage seam (ARCHITECTURE, Storage): the stores of one database, chosen once.

``open_storage`` is the one place that picks the PostgreSQL or the SQLite implementation of
each store (``app.db.postgres``, ``app.db.shared``); everything above ``app.db`` works with the
protocols and with what ``Storage`` says about the backend (``shares_across_processes``), never
with the dialect.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import make_url

from app.db.accepts import AcceptStore
from app.db.engine import Database
from app.db.postgres.accepts import PostgresAccepts
from app.db.postgres.task_reads import PostgresTaskReads
from app.db.postgres.turn_writes import PostgresTurnWrites
from app.db.shared.accepts import SharedAccepts
from app.db.shared.task_reads import SharedTaskReads
from app.db.shared.turn_writes import SharedTurnWrites
from app.db.signals import Signals
from app.db.task_reads import TaskReadStore
from app.db.turns import TurnWriteStore


def shares_across_processes(database_url: str) -> bool:
    """Whether several processes may use the database at ``database_url`` at once
    (PostgreSQL); SQLite is the embedded single-process store."""
    return not make_url(database_url).drivername.startswith("sqlite")


@dataclass(frozen=True)
class Storage:
    db: Database
    shares_across_processes: bool
    signals: Signals
    accepts: AcceptStore
    task_reads: TaskReadStore
    turn_writes: TurnWriteStore


def open_storage(db: Database) -> Storage:
    """The stores on ``db``: the backend is chosen here, once."""
    signals = db.signals
    accepts: AcceptStore = SharedAccepts(db)
    task_reads: TaskReadStore = SharedTaskReads(db)
    turn_writes: TurnWriteStore = SharedTurnWrites(db, db.clock)
    pool = db.statement_pool  # PostgreSQL's: its fast paths run on it
    if pool is not None:
        accepts = PostgresAccepts(pool, SharedAccepts(db), signals.turns)
        task_reads = PostgresTaskReads(pool)
        turn_writes = PostgresTurnWrites(pool, SharedTurnWrites(db, db.clock), signals.pushes)
    return Storage(
        db=db,
        shares_across_processes=pool is not None,
        signals=signals,
        accepts=accepts,
        task_reads=task_reads,
        turn_writes=turn_writes,
    )
