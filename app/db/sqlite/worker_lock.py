"""One worker per SQLite file (ARCHITECTURE, SQLite mode: "refuse to start several workers").

SQLite mode is single-process: leases compare against the process clock and the wake-up hook is
in-process. A second worker on the same file would still be *correct* (every write is fenced)
but would defeat both assumptions, so the worker role takes an exclusive ``flock`` on a lock file
next to the database (``<db file>.worker-lock``) for as long as it runs. ``serve`` (with its
in-process worker) and ``looping-edge worker`` both take it; ``serve --no-worker`` does not, so
one HTTP process plus one ``looping-edge worker`` process is allowed (the worker then relies on
the poll fallback for wake-ups). The kernel drops the lock when the process dies, even on
``kill -9``, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from sqlalchemy.engine import make_url

from app.errors import ConfigError


def worker_lock_path(database_url: str) -> Path | None:
    """The lock file for a file-backed SQLite URL; ``None`` for PostgreSQL or in-memory."""
    url = make_url(database_url)
    if not url.drivername.startswith("sqlite") or url.database in (None, "", ":memory:"):
        return None
    return Path(f"{url.database}.worker-lock")


class WorkerLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise ConfigError(
                "DATABASE_URL: another process already runs a worker on this SQLite database; "
                "several workers on SQLite are refused (use PostgreSQL to run more workers)",
                reason="sqlite_single_worker",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is None:
            return
        with contextlib.suppress(OSError):
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()
        self._file = None
