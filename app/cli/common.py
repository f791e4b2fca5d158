"""Shared CLI plumbing: settings from the environment, one-line failures, exit codes."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy.exc import SQLAlchemyError

from app.db.engine import Database
from app.errors import ConfigError
from app.settings import Settings, load_settings

T = TypeVar("T")

EXIT_USAGE = 2  # a bad argument, or a named object that does not exist
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE (sysexits.h): the database cannot be used
EXIT_CONFIG = 78  # EX_CONFIG (sysexits.h): a setting is missing or wrong

# What a database that is unreachable, missing, or not migrated raises through SQLAlchemy and
# asyncpg/aiosqlite (connection refused and DNS failures are OSErrors).
DATABASE_ERRORS: tuple[type[BaseException], ...] = (SQLAlchemyError, OSError)
_DB_FAILURE = (
    "cannot use the database ({}); is DATABASE_URL right and reachable, "
    "and the schema migrated ({} migrate)?"
)


def edge_command() -> str:
    """``looping-edge`` as a hint prints it, runnable as printed from the current directory:
    the bare name when PATH finds this installation's script, else that script's path,
    relative where it sits below the current directory (``.venv/bin/looping-edge`` in a
    checkout whose venv is not activated: found by trying the quickstart, the bare name was
    "command not found")."""
    ours = Path(sys.executable).parent / "looping-edge"
    if not ours.is_file():
        return "looping-edge"  # not run from an installation (python -m app.cli.main)
    on_path = shutil.which("looping-edge")
    if on_path is not None and os.path.samefile(on_path, ours):
        return "looping-edge"
    where = Path(os.path.abspath(ours))
    try:
        return str(where.relative_to(Path.cwd()))
    except ValueError:
        return str(where)


def printable(value: str) -> str:
    """Stored text for a terminal: control and format characters (an ESC sequence, a
    right-to-left override) shown escaped, so a row can neither split nor restyle the output."""
    return "".join(
        c if unicodedata.category(c) not in _HIDDEN else c.encode("unicode_escape").decode()
        for c in value
    )


_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})


def fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"looping-edge: {message}", file=sys.stderr)
    return code


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        raise SystemExit(fail(exc.message, EXIT_CONFIG)) from None


def open_database(settings: Settings) -> Database:
    """The database of ``DATABASE_URL``, or exit 78 naming it (no connection is made yet)."""
    try:
        return Database(settings.database_url)
    except ConfigError as exc:
        raise SystemExit(fail(exc.message, EXIT_CONFIG)) from None


def database_failed(exc: BaseException) -> int:
    """One line, exit 69. Only the error's class: its text can hold the DSN, SQL parameters
    (a tenant's agent config) or the server's address."""
    return fail(_DB_FAILURE.format(type(exc).__name__, edge_command()), EXIT_UNAVAILABLE)


def run(coro_factory: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await coro_factory()

    return asyncio.run(main())
