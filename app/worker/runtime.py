"""Turn workers as a background service: ``serve`` runs one in-process, ``looping-edge worker``
runs them alone (``app.runtime.attach_background`` calls ``build_worker``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.agents.registry import AgentRegistry, default_registry
from app.db.sqlite.worker_lock import WorkerLock
from app.tasks.turn_writes import TurnWrites
from app.worker.runner import TurnRunner
from app.worker.service import TurnWorker

if TYPE_CHECKING:
    from app.services import BackgroundService, EdgeServices


def build_worker(
    services: EdgeServices,
    *,
    owner: str,
    agents: AgentRegistry | None = None,
    concurrency: int | None = None,
) -> BackgroundService | None:
    settings = services.settings
    db = services.db
    runner = TurnRunner(
        db=db,
        settings=settings,
        writes=TurnWrites(db, settings),
        agents=agents or default_registry(services.llm),
        tenants=services.tenants,
        metrics=services.metrics,
        sessions=services.llm.sessions if services.llm is not None else None,
    )
    lock_path = db.storage.worker_lock_path
    return TurnWorker(
        db=db,
        settings=settings,
        runner=runner,
        owner=owner,
        concurrency=concurrency,
        worker_lock=WorkerLock(lock_path) if lock_path is not None else None,
    )
