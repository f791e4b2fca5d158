"""Schema management through Alembic only (the app never calls ``create_all``)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

import migrations
from app.db.sqlite_file import make_private

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def upgrade_to_head(database_url: str) -> None:
    """Upgrade the schema. Alembic's env drives its own event loop, so when called from
    inside a running loop the upgrade runs on a helper thread."""
    make_private(database_url)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        command.upgrade(alembic_config(database_url), "head")
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(command.upgrade, alembic_config(database_url), "head").result()


def head_revision(database_url: str) -> str | None:
    return ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(_current)
