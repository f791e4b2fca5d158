"""Liveness and readiness (CONTRACT §2), and the admin API's health summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from app.db.engine import Database
from app.db.migrate import current_revision, head_revision
from app.db.storage import Storage


@dataclass
class Readiness:
    """Ready = DB reachable, schema at head, key loaded, not draining."""

    db: Database
    key_loaded: bool
    draining: bool = False
    _head: str | None = field(default=None, init=False)

    async def check(self) -> tuple[bool, dict[str, str]]:
        detail: dict[str, str] = {
            "key": "ok" if self.key_loaded else "missing",
            "draining": "yes" if self.draining else "no",
        }
        try:
            async with self.db.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            detail["database"] = "ok"
            if self._head is None:
                self._head = head_revision(self.db.url)
            current = await current_revision(self.db.engine)
            detail["schema"] = "ok" if current == self._head else "not at head"
        except Exception:
            detail["database"] = "unreachable"
            detail["schema"] = "unknown"
        ready = (
            detail["database"] == "ok"
            and detail["schema"] == "ok"
            and self.key_loaded
            and not self.draining
        )
        return ready, detail


async def health_summary(storage: Storage) -> dict[str, Any]:
    """What the admin API's ``GET /v1/health`` shows (issue 52): tenants, unfinished turns by
    status, the push outbox's depth and the age of its oldest pending push."""
    overview = await storage.overview.overview()
    gauges = await storage.push_outbox.gauges()
    return {
        "tenants": {
            "enabled": overview.tenants_enabled,
            "disabled": overview.tenants_disabled,
        },
        "unfinishedTurns": dict(overview.unfinished_turns),
        "push": {
            "outboxDepth": gauges.depth,
            "oldestPendingSeconds": round(gauges.oldest_pending_seconds, 3),
        },
    }
