from __future__ import annotations

from pathlib import Path

import pytest

from app.db.postgres.listen import asyncpg_dsn
from app.db.sqlite.worker_lock import WorkerLock, worker_lock_path
from app.errors import ConfigError
from app.settings import load_settings
from app.worker.runner import backoff_seconds


def test_asyncpg_dsn_drops_the_driver_and_keeps_credentials() -> None:
    url = "postgresql+asyncpg://edge:s3cret@db.internal:5433/looping?ssl=require"
    assert asyncpg_dsn(url) == "postgresql://edge:s3cret@db.internal:5433/looping?ssl=require"


def test_sqlite_lock_path_only_for_file_databases(tmp_path: Path) -> None:
    assert worker_lock_path(f"sqlite+aiosqlite:///{tmp_path}/edge.db") == Path(
        f"{tmp_path}/edge.db.worker-lock"
    )
    assert worker_lock_path("sqlite+aiosqlite:///:memory:") is None
    assert worker_lock_path("postgresql+asyncpg://u@h/db") is None


def test_sqlite_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    path = tmp_path / "edge.db.worker-lock"
    first, second = WorkerLock(path), WorkerLock(path)
    first.acquire()
    with pytest.raises(ConfigError) as info:
        second.acquire()
    assert info.value.message.startswith("DATABASE_URL:")
    first.release()
    second.acquire()
    second.release()


def test_backoff_doubles_per_attempt_with_bounded_jitter() -> None:
    settings = load_settings(turn_retry_base_seconds=2.0)
    for attempt, base in ((1, 2.0), (2, 4.0), (3, 8.0)):
        for _ in range(20):
            assert 0.75 * base <= backoff_seconds(settings, attempt) <= 1.25 * base
