"""What the status page shows, read through the same services and stores as the admin API:
the tenant service's list, the health summary, the dead-letter listing, and the overview
store's per-tenant turns, worker leases and activity (``app.db.overview``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.admin.context import AdminContext
from app.db.overview import Activity, TenantTurns, WorkerLeases
from app.db.push_outbox import DeadLetter
from app.db.tenants import TenantRecord
from app.ops.health import health_summary
from app.push.dead_letters import list_dead

CHART_MINUTES = 60
DEAD_LETTERS_SHOWN = 50


@dataclass(frozen=True)
class StatusData:
    tenants: Sequence[TenantRecord]
    health: dict[str, Any]  # as GET /v1/health answers
    turns: Sequence[TenantTurns]
    workers: Sequence[WorkerLeases]
    activity: Activity
    dead_letters: Sequence[DeadLetter] | None  # None: the viewer may not read them


async def gather(admin: AdminContext, *, with_dead_letters: bool) -> StatusData:
    storage = admin.db.storage
    dead = await list_dead(admin.db, limit=DEAD_LETTERS_SHOWN) if with_dead_letters else None
    return StatusData(
        tenants=await admin.tenants.list(),
        health=await health_summary(storage),
        turns=await storage.overview.turns_by_tenant(),
        workers=await storage.overview.workers(),
        activity=await storage.overview.activity(CHART_MINUTES),
        dead_letters=dead,
    )
