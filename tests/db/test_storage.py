"""The storage seam (``app.db.storage``): one object per database picks every store's
implementation once, and nothing outside ``app/db`` asks which backend it runs on."""

from __future__ import annotations

import re
from pathlib import Path

from app.db.engine import Database
from app.db.postgres.accepts import PostgresAccepts
from app.db.postgres.mailbox import PostgresMailbox
from app.db.postgres.push_outbox import PostgresPushOutbox
from app.db.postgres.task_reads import PostgresTaskReads
from app.db.postgres.turn_writes import PostgresTurnWrites
from app.db.shared.accepts import SharedAccepts
from app.db.shared.mailbox import SharedMailbox
from app.db.shared.push_outbox import SharedPushOutbox
from app.db.shared.task_reads import SharedTaskReads
from app.db.shared.turn_writes import SharedTurnWrites
from app.db.signals import PUSH_CHANNEL, TURNS_CHANNEL
from app.db.storage import shares_across_processes

APP = Path(__file__).resolve().parents[2] / "app"
# How a module would ask which backend it runs on.
_BACKEND_QUESTION = re.compile(r"is_sqlite|statement_pool is None|dialect\.name")


def test_only_the_storage_package_asks_which_backend_it_runs_on() -> None:
    asking = sorted(
        str(path.relative_to(APP))
        for path in APP.rglob("*.py")
        if _BACKEND_QUESTION.search(path.read_text(encoding="utf-8"))
    )
    assert [p for p in asking if not p.startswith("db/")] == []


def test_whether_processes_share_the_storage_is_read_from_the_url() -> None:
    assert shares_across_processes("postgresql+asyncpg://edge@db/looping")
    assert not shares_across_processes("sqlite+aiosqlite:///edge.db")


async def test_sqlite_gets_the_shared_stores_once(sqlite_url: str, tmp_path: Path) -> None:
    db = Database(sqlite_url)
    try:
        storage = db.storage
        assert storage is db.storage  # built once
        assert not storage.shares_across_processes
        assert isinstance(storage.accepts, SharedAccepts)
        assert isinstance(storage.turn_writes, SharedTurnWrites)
        assert isinstance(storage.task_reads, SharedTaskReads)
        assert isinstance(storage.mailbox, SharedMailbox)
        assert isinstance(storage.push_outbox, SharedPushOutbox)
        assert storage.worker_lock_path is not None  # one worker per SQLite file
        # Nobody else shares the file: nothing to NOTIFY, nothing to LISTEN to.
        assert storage.signals.turns.remote_channel() is None
        assert storage.signals.pushes.remote_channel() is None
    finally:
        await db.dispose()


async def test_postgres_gets_its_fast_paths(pg_database: Database) -> None:
    storage = pg_database.storage
    assert storage.shares_across_processes
    assert isinstance(storage.accepts, PostgresAccepts)
    assert isinstance(storage.turn_writes, PostgresTurnWrites)
    assert isinstance(storage.task_reads, PostgresTaskReads)
    assert isinstance(storage.mailbox, PostgresMailbox)
    assert isinstance(storage.push_outbox, PostgresPushOutbox)
    assert storage.worker_lock_path is None
    assert storage.signals.turns.remote_channel() == TURNS_CHANNEL
    assert storage.signals.pushes.remote_channel() == PUSH_CHANNEL
