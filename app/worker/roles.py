"""The parts a turn's run is handed (``app.worker.runner``), as roles: the task snapshot it
starts on, the guarded task writes, the tenant directory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from app.db.fence import Fence
from app.db.turns import Finished, KnownTask, SettleTurn
from app.security.caller import CallerScope
from app.tasks.outcome import TurnOutcome
from app.tenants.registry import TenantRecord


class Snapshot(Protocol):
    """What ``TurnWrites.load_turn_context`` returns (app.tasks.turn_writes.TaskSnapshot)."""

    @property
    def task(self) -> Mapping[str, Any]: ...
    @property
    def history(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def state(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def context_id(self) -> str: ...
    def known(self, version: int) -> KnownTask: ...


class Writes(Protocol):
    """The guarded task writes (``app.tasks.turn_writes.TurnWrites``)."""

    async def mark_working(self, scope: CallerScope, task_id: str, fence: Fence) -> bool: ...
    async def record_progress(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        *,
        step_key: str,
        text: str,
        context_id: str | None = None,
    ) -> bool: ...
    async def finish_and_settle(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        outcome: TurnOutcome,
        known: KnownTask | None = None,
        settle: SettleTurn | None = None,
        *,
        seen_history: int | None = None,
    ) -> Finished: ...
    async def load_turn_context(self, scope: CallerScope, task_id: str) -> Any: ...


class Tenants(Protocol):
    """The tenant directory (``app.tenants.registry.TenantDirectory``)."""

    async def get(self, tenant_id: str) -> TenantRecord | None: ...
