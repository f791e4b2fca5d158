"""The mailbox store: identity leases and the ``turns`` rows a lease holder drains.

One lease per ``(tenant, identity)`` in ``actors`` (ARCHITECTURE, Durable execution: claim,
heartbeat, release). A claim takes actors whose lease is free or expired and whose *head* turn
(the lowest ``turns.id`` still unfinished) is due, sets the owner and ``lease_until`` from the
storage's clock and bumps ``fence``; every later write of the holder is conditioned on that
fence (``app.db.fence``), so a takeover silences the previous holder at once. Turn statuses:
``queued`` → ``running`` → ``done`` | ``dead`` (failed for good) | ``canceled``.

``MailboxStore`` is the seam between the worker (``app.worker``: when to claim, run, retry or
give up) and the backends: the SQLAlchemy transactions both can run
(``app.db.shared.mailbox``) and PostgreSQL's one-statement units on the statement pool with
``SKIP LOCKED`` claims (``app.db.postgres.mailbox``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.db.fence import Fence
from app.db.turns import QueuedTurn as QueuedTurn
from app.db.turns import TaskSnapshot
from app.security.caller import CallerScope

# last_error holds a category, never exception text (it may carry secrets or prompts).
ERROR_TIMEOUT = "timeout"
ERROR_AGENT = "agent_error"
ERROR_INTERRUPTED = "interrupted"
ERROR_REFUSED = "write_refused"


@dataclass(frozen=True)
class Lease:
    """A claimed identity: the scope its turns run in and the fence its writes carry."""

    scope: CallerScope
    fence: Fence


@dataclass(frozen=True)
class Settled:
    """What ``settle_and_head`` found: whether the settle applied (False: fenced out, the
    turn belongs to another holder now) and, if it did, the identity's next due turn."""

    applied: bool
    next_turn: QueuedTurn | None = None


@dataclass(frozen=True)
class WorkingMark:
    """How ``begin`` may mark a first attempt's task working: from ``allowed`` to ``state``
    with ``status`` (the state machine's ``mark_working``)."""

    allowed: frozenset[str]
    state: str
    status: dict[str, Any]
    at: datetime


@dataclass(frozen=True)
class Begun:
    """``applied`` False: fenced out, touch nothing. ``snapshot`` None: the task is gone
    (purged by retention, or never committed). ``marked``: the task was also marked working
    by the same unit of work; the snapshot is from before that."""

    applied: bool
    snapshot: TaskSnapshot | None = None
    marked: bool = False


class MailboxStore(Protocol):
    async def claim(self, *, owner: str, limit: int, lease_seconds: float) -> list[Lease]:
        """Claim up to ``limit`` identities with due work; concurrent claimers never wait on
        each other's candidates and never both get the same actor."""
        ...

    async def claim_with_heads(
        self, *, owner: str, limit: int, lease_seconds: float
    ) -> list[tuple[Lease, QueuedTurn | None]]:
        """``claim`` and, for each new lease, its identity's head turn (``head_turn``)."""
        ...

    async def head_turn(self, lease: Lease) -> QueuedTurn | None:
        """The identity's lowest unfinished turn if it is due, else ``None``."""
        ...

    async def begin_attempt(self, lease: Lease, turn: QueuedTurn) -> bool:
        """``running`` and one more attempt, before anything else happens."""
        ...

    async def begin(self, lease: Lease, turn: QueuedTurn, mark: WorkingMark | None) -> Begun:
        """``begin_attempt`` and the task's snapshot; with ``mark``, where the backend can,
        the task marked working in the same unit of work (``Begun.marked``)."""
        ...

    async def settle(
        self, lease: Lease, turn_id: int, status: str, *, error: str | None = None
    ) -> bool:
        """Final turn status: ``done`` | ``dead`` | ``canceled``."""
        ...

    async def settle_and_head(
        self, lease: Lease, turn_id: int, status: str, *, error: str | None = None
    ) -> Settled:
        """``settle``, then the identity's next head turn."""
        ...

    async def retry_later(self, lease: Lease, turn_id: int, *, delay: float, error: str) -> bool:
        """Back to ``queued``, not before ``now + delay`` (the identity's later turns wait)."""
        ...

    async def give_back(self, lease: Lease, turn_id: int) -> bool:
        """Queue the turn again without counting the attempt (shutdown interrupted it)."""
        ...

    async def extend(self, leases: Iterable[Lease], *, lease_seconds: float) -> set[Lease]:
        """Heartbeat: the leases whose fence still matches, extended; any other was lost."""
        ...

    async def release(self, lease: Lease) -> bool:
        """Give the identity back (only if still ours)."""
        ...

    async def still_held(self, lease: Lease) -> bool:
        """Whether the lease is still ours and unexpired."""
        ...

    async def task_states(
        self, keys: Iterable[tuple[CallerScope, str]]
    ) -> dict[tuple[CallerScope, str], str]:
        """Current ``tasks.state`` of ``(scope, task id)`` pairs (the cancel check)."""
        ...
