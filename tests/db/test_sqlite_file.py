"""The SQLite database and its side files are 0600 after ``migrate`` and while serving, whatever
the umask (issue 47 row 7): the file holds prompts, history and push credentials."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.sqlite_file import make_private, sqlite_path


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _modes(db: Path) -> dict[str, int]:
    return {
        p.name: stat.S_IMODE(p.stat().st_mode)
        for p in db.parent.iterdir()
        if p.name.startswith(db.name)
    }


async def test_migrate_and_serve_leave_every_file_private(tmp_path: Path, open_umask: None):
    db_file = tmp_path / "edge.db"
    url = f"sqlite+aiosqlite:///{db_file}"
    upgrade_to_head(url)
    assert _modes(db_file) == {"edge.db": 0o600}
    db = Database(url)
    try:
        async with db.transaction() as session:  # a write: WAL and shared-memory files appear
            await session.execute(text("CREATE TABLE probe (x INTEGER)"))
            await session.execute(text("INSERT INTO probe VALUES (1)"))
        modes = _modes(db_file)
        assert {"edge.db-wal", "edge.db-shm"} <= set(modes)
        assert set(modes.values()) == {0o600}, modes
    finally:
        await db.dispose()


def test_files_an_older_version_left_readable_are_tightened(tmp_path: Path, open_umask: None):
    db_file = tmp_path / "edge.db"
    for name in ("edge.db", "edge.db-wal", "edge.db-shm", "edge.db-journal"):
        (tmp_path / name).write_bytes(b"")
        (tmp_path / name).chmod(0o644)
    make_private(f"sqlite+aiosqlite:///{db_file}")
    assert set(_modes(db_file).values()) == {0o600}


def test_only_sqlite_files_are_touched() -> None:
    assert sqlite_path("postgresql+asyncpg://u@h/db") is None
    assert sqlite_path("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_path("sqlite+aiosqlite:///var/edge.db") == Path("var/edge.db")
