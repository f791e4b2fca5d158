"""The SQLite database file is private to the edge's user: it holds prompts, history and
push credentials, like the signing key file.

SQLite creates the file with the process's umask (usually world-readable) and gives its
``-wal``, ``-shm`` and ``-journal`` files the main file's permission bits, so creating the
main file ``0600`` before SQLite opens it, and tightening files an older version left open,
keeps all of them private.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import make_url

PRIVATE_MODE = 0o600
SIDE_FILES = ("-wal", "-shm", "-journal")


def sqlite_path(url: str) -> Path | None:
    """The database file of a ``sqlite`` URL; ``None`` for other URLs and in-memory ones."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def make_private(url: str) -> None:
    """Create the database file ``0600`` when missing and make it and its side files ``0600``."""
    path = sqlite_path(url)
    if path is None:
        return
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_MODE))
    except FileExistsError:
        pass
    except FileNotFoundError:
        return  # its folder is missing: SQLite reports that in its own words
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in SIDE_FILES)):
        try:
            if candidate.stat().st_mode & 0o777 != PRIVATE_MODE:
                candidate.chmod(PRIVATE_MODE)
        except FileNotFoundError:
            continue
