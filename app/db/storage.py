"""The storage seam (ARCHITECTURE, Storage): the stores of one database, chosen once.

``open_storage`` is the one place that picks the PostgreSQL or the SQLite implementation of
each store (``app.db.postgres``, ``app.db.shared``); everything above ``app.db`` works with the
protocols and with what ``Storage`` says about the backend (``shares_across_processes``), never
with the dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url

from app.db.accepts import AcceptStore
from app.db.admin_tokens import AdminTokenStore
from app.db.attachments import AttachmentStore
from app.db.clock import PROCESS_CLOCK, SERVER_CLOCK
from app.db.engine import Database
from app.db.mailbox import MailboxStore
from app.db.negotiations import NegotiationStore
from app.db.overview import OverviewStore
from app.db.peer_pins import PeerPinStore
from app.db.peer_sends import PeerSendStore
from app.db.postgres.accepts import IDENTITY_LOCK_SQL, PostgresAccepts
from app.db.postgres.mailbox import LOCKING_SQL, PostgresMailbox
from app.db.postgres.push_outbox import PostgresPushOutbox
from app.db.postgres.sessions import PostgresSessions
from app.db.postgres.subtasks import PostgresSubtasks
from app.db.postgres.task_reads import PostgresTaskReads
from app.db.postgres.turn_writes import PostgresTurnWrites
from app.db.push_configs import PushConfigStore
from app.db.push_outbox import PushOutboxStore
from app.db.sessions import SessionStore
from app.db.shared.accepts import SharedAccepts
from app.db.shared.admin_tokens import SharedAdminTokens
from app.db.shared.attachments import SharedAttachments
from app.db.shared.mailbox import SharedMailbox
from app.db.shared.negotiations import SharedNegotiations
from app.db.shared.overview import SharedOverview, postgres_minute, sqlite_minute
from app.db.shared.peer_pins import SharedPeerPins
from app.db.shared.peer_sends import SharedPeerSends
from app.db.shared.push_configs import SharedPushConfigs
from app.db.shared.push_outbox import SharedPushOutbox
from app.db.shared.sessions import SharedSessions
from app.db.shared.subtasks import SharedSubtasks
from app.db.shared.task_events import SharedTaskEvents
from app.db.shared.task_lifecycle import SharedTaskLifecycle
from app.db.shared.task_reads import SharedTaskReads
from app.db.shared.tenants import SharedTenants
from app.db.shared.turn_writes import SharedTurnWrites
from app.db.signals import Signals
from app.db.sqlite.worker_lock import worker_lock_path
from app.db.statement_pool import StatementPool
from app.db.subtasks import SubtaskStore
from app.db.task_events import TaskEventStore
from app.db.task_lifecycle import TaskLifecycleStore
from app.db.task_reads import TaskReadStore
from app.db.tenants import TenantRecordStore
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
    mailbox: MailboxStore
    push_configs: PushConfigStore
    push_outbox: PushOutboxStore
    task_lifecycle: TaskLifecycleStore
    task_reads: TaskReadStore
    turn_writes: TurnWriteStore
    tenants: TenantRecordStore
    sessions: SessionStore
    task_events: TaskEventStore
    negotiations: NegotiationStore
    peer_pins: PeerPinStore
    peer_sends: PeerSendStore
    subtasks: SubtaskStore
    admin_tokens: AdminTokenStore
    overview: OverviewStore
    attachments: AttachmentStore
    # The file a worker role locks where only one process may run workers (a SQLite file);
    # None where workers of several processes share the storage, or nothing outlives it.
    worker_lock_path: Path | None = None


def open_storage(db: Database) -> Storage:
    """The stores on ``db``: the backend is chosen here, once."""
    pool = db.statement_pool  # PostgreSQL's: its fast paths run on it
    return _sqlite(db) if pool is None else _postgres(db, pool)


def _sqlite(db: Database) -> Storage:
    """One process: the process clock is the database clock, nobody else to wake."""
    turn_writes = SharedTurnWrites(db, PROCESS_CLOCK.now)
    return Storage(
        db=db,
        shares_across_processes=False,
        signals=db.signals,
        accepts=SharedAccepts(db),
        mailbox=SharedMailbox(db, PROCESS_CLOCK, turn_writes),
        push_configs=SharedPushConfigs(db),
        push_outbox=SharedPushOutbox(db, PROCESS_CLOCK, db.signals.pushes),
        task_lifecycle=SharedTaskLifecycle(db),
        task_reads=SharedTaskReads(db),
        turn_writes=turn_writes,
        tenants=SharedTenants(db),
        sessions=SharedSessions(db, sqlite_insert),
        task_events=SharedTaskEvents(db),
        negotiations=SharedNegotiations(db, sqlite_insert),
        peer_pins=SharedPeerPins(db, sqlite_insert),
        peer_sends=SharedPeerSends(db, sqlite_insert),
        subtasks=SharedSubtasks(db, sqlite_insert),
        admin_tokens=SharedAdminTokens(db),
        overview=SharedOverview(db, PROCESS_CLOCK, sqlite_minute),
        attachments=SharedAttachments(db),
        worker_lock_path=worker_lock_path(db.url),
    )


def _postgres(db: Database, pool: StatementPool) -> Storage:
    """Several processes: the server clock, the statement pool's one-statement paths."""
    shared_writes = SharedTurnWrites(db, SERVER_CLOCK.now)
    shared_mailbox = SharedMailbox(db, SERVER_CLOCK, shared_writes, locking=LOCKING_SQL)
    signals = db.signals
    return Storage(
        db=db,
        shares_across_processes=True,
        signals=signals,
        accepts=PostgresAccepts(
            pool, SharedAccepts(db, identity_lock=IDENTITY_LOCK_SQL), signals.turns
        ),
        mailbox=PostgresMailbox(pool, shared_mailbox),
        push_configs=SharedPushConfigs(db),
        push_outbox=PostgresPushOutbox(pool, SharedPushOutbox(db, SERVER_CLOCK, signals.pushes)),
        task_lifecycle=SharedTaskLifecycle(db),
        task_reads=PostgresTaskReads(pool),
        turn_writes=PostgresTurnWrites(pool, signals.pushes),
        tenants=SharedTenants(db),
        sessions=PostgresSessions(pool, SharedSessions(db, pg_insert)),
        # Stream reads are few and small (one per wake-up per stream): the ORM path suffices.
        task_events=SharedTaskEvents(db),
        negotiations=SharedNegotiations(db, pg_insert),
        peer_pins=SharedPeerPins(db, pg_insert),
        peer_sends=SharedPeerSends(db, pg_insert),
        subtasks=PostgresSubtasks(pool, SharedSubtasks(db, pg_insert)),
        # Admin requests are few: the ORM path on both backends.
        admin_tokens=SharedAdminTokens(db),
        overview=SharedOverview(db, SERVER_CLOCK, postgres_minute),
        # Read once per turn that carried attachments: the ORM path on both backends.
        attachments=SharedAttachments(db),
    )
