"""The push-outbox store as the deliverers and the operator see it (CONTRACT §7).

Claiming ("per task, in order, never two concurrently"):

- a row is *due* when ``status='pending'``, ``next_attempt_at <= now`` and it is not leased
  (``lease_until`` unset or past: a crashed deliverer's lease simply runs out);
- it is *eligible* only if it is the lowest pending id of its ``(tenant, task, config)``
  (order per push target) and no row of its task is leased right now (never two of one task
  on the wire at once, whatever the number of processes).

A dead row is terminal: the next row of its task becomes eligible (a dead letter must not block
a task's later pushes forever; the operator can replay it). Rows are written by the
transaction that makes the change they report (``app.db.outbox``).

``PushOutboxStore`` is the seam between delivery (``app.push``: the retry policy, sending,
metrics) and the backends: SQLAlchemy transactions (``app.db.shared.push_outbox``) and
PostgreSQL's claim under an advisory lock with ``SKIP LOCKED`` on the statement pool
(``app.db.postgres.push_outbox``). Times come from the storage's clock; every timestamp is
read back as UTC.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol


@dataclass(frozen=True)
class ClaimedPush:
    """One leased outbox row with what an attempt needs (secrets still sealed)."""

    id: int
    tenant: str
    identity: str
    task_id: str
    config_id: str
    kind: str
    message_key: str
    payload: dict[str, Any]
    attempts: int  # including the attempt this claim is for
    unauthorized_attempts: int
    first_attempt_at: datetime
    created_at: datetime
    url: str | None  # None: the push config was deleted after the row was queued
    token_enc: str | None
    auth_scheme: str | None
    auth_credentials_enc: str | None


@dataclass(frozen=True)
class PushRecord:
    """An attempt's outcome as stored: the row's new status (``delivered``, ``dead``, or
    ``pending`` again for a retry at ``next_attempt_at``)."""

    status: str
    next_attempt_at: datetime | None
    unauthorized_attempts: int
    error: str | None
    http_status: int | None


@dataclass(frozen=True)
class OutboxGauges:
    depth: int
    oldest_pending_seconds: float


@dataclass(frozen=True)
class DeadLetter:
    id: int
    tenant: str
    task_id: str
    kind: str
    message_key: str
    attempts: int
    last_status: int | None
    last_error: str | None
    created_at: datetime

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "taskId": self.task_id,
            "kind": self.kind,
            "messageId": f"{self.task_id}:{self.message_key}",
            "attempts": self.attempts,
            "lastStatus": self.last_status,
            "lastError": self.last_error,
            "createdAt": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class DeadLetterFilter:
    """More ways to narrow a dead-letter listing (the admin API's filters and pages)."""

    task_id: str | None = None
    kind: str | None = None
    after_id: int | None = None  # only rows with a larger id (the next page)


@dataclass(frozen=True)
class ReplayReport:
    requeued: tuple[int, ...]
    superseded: tuple[int, ...]
    not_dead: tuple[int, ...]


class PushOutboxStore(Protocol):
    async def claim(self, *, owner: str, lease: timedelta, limit: int) -> list[ClaimedPush]:
        """Lease up to ``limit`` eligible rows (at most one per task) for ``owner``."""
        ...

    async def still_ours(self, push_id: int, owner: str) -> bool:
        """Right before sending: still pending (not canceled) and still leased to ``owner``."""
        ...

    async def record(
        self, push_id: int, owner: str, decide: Callable[[datetime], PushRecord]
    ) -> bool:
        """Write ``decide(now)`` if the row is still ``owner``'s and pending."""
        ...

    async def drop(self, push_id: int, owner: str, *, reason: str) -> bool:
        """Cancel a row that can never be sent (its push config is gone)."""
        ...

    async def gauges(self) -> OutboxGauges: ...

    async def list_dead(
        self, *, tenant: str | None, limit: int, filters: DeadLetterFilter | None = None
    ) -> list[DeadLetter]:
        """Dead rows in id order, at most ``limit``, narrowed by ``filters``."""
        ...

    async def replay(self, *, ids: list[int] | None, tenant: str | None) -> ReplayReport:
        """Re-queue dead rows (all when ``ids`` is None) and wake every deliverer."""
        ...

    async def trace_context(self, push: ClaimedPush) -> dict[str, Any] | None:
        """The W3C trace context of the turn that queued the push (issue 53): kept with the
        row; for a row queued without one, the task's latest turn's; None when neither."""
        ...
