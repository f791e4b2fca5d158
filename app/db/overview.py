"""Counts an operator reads at a glance (the admin API's health summary, issue 52, and the
status page, issue 53): tenants by state, unfinished turns by status and by tenant, the leases
worker processes hold, and accepts and completions per minute. The push outbox's depth comes
from its own store (``PushOutboxStore.gauges``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Overview:
    tenants_enabled: int
    tenants_disabled: int
    unfinished_turns: Mapping[str, int]  # every unfinished status, zero included


@dataclass(frozen=True)
class TenantTurns:
    """A tenant's unfinished turns of one status, and when the oldest of them was accepted."""

    tenant: str
    status: str
    count: int
    oldest_at: datetime


@dataclass(frozen=True)
class WorkerLeases:
    """What the database knows of one worker process (its lease-owner name): the identities
    it drains now (an actor lease each, one worker slot each) and the pushes it has on the
    wire (a push-outbox lease each). A process holding no lease is not seen."""

    owner: str
    actor_leases: int
    push_leases: int
    lease_until: datetime  # the latest expiry among its leases


@dataclass(frozen=True)
class Activity:
    """Tasks accepted and tasks finished (reached a terminal state) per minute, oldest minute
    first, over the ``len(accepted)`` minutes ending at ``until``."""

    until: datetime
    accepted: Sequence[int]
    finished: Sequence[int]


class OverviewStore(Protocol):
    async def overview(self) -> Overview: ...

    async def turns_by_tenant(self) -> list[TenantTurns]:
        """Unfinished turns grouped by tenant and status, in tenant order."""
        ...

    async def workers(self) -> list[WorkerLeases]:
        """Lease owners holding an unexpired actor or push lease, in owner order."""
        ...

    async def activity(self, minutes: int) -> Activity:
        """Accepts and completions per minute over the last ``minutes`` minutes (one query
        over the tasks' created and terminal-update times)."""
        ...
