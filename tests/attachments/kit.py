"""What the attachments tests through the edge share."""

from __future__ import annotations

from app.agents.llm.plugins import build_plugins
from app.agents.llm.runtime import LlmRuntime
from app.db.engine import Database
from app.db.storage import open_storage


def llm_runtime(db: Database) -> LlmRuntime:
    """The ``llm`` agents' runtime on the edge's database (sessions and subtasks)."""
    storage = open_storage(db)
    return LlmRuntime(
        environ={},
        failure_text="failed",
        plugins=build_plugins([], {}),
        sessions=storage.sessions,
        subtasks=storage.subtasks,
    )
