"""An identity's mailbox as the worker drains it: the ``turns`` rows a lease holder runs, in
``turns.id`` order. Each function is one unit of work of the storage's mailbox store
(``app.db.mailbox.MailboxStore``); every turn update there is fenced, so a zombie worker that
lost its lease cannot move a turn the new holder owns.
"""

from __future__ import annotations

from app.db.engine import Database
from app.db.mailbox import ERROR_AGENT as ERROR_AGENT
from app.db.mailbox import ERROR_INTERRUPTED as ERROR_INTERRUPTED
from app.db.mailbox import ERROR_REFUSED as ERROR_REFUSED
from app.db.mailbox import ERROR_TIMEOUT as ERROR_TIMEOUT
from app.db.mailbox import Lease
from app.db.mailbox import QueuedTurn as QueuedTurn
from app.db.mailbox import Settled as Settled


async def claim_with_heads(
    db: Database, *, owner: str, limit: int, lease_seconds: float
) -> list[tuple[Lease, QueuedTurn | None]]:
    """``lease.claim`` and, for each new lease, its identity's head turn (``head_turn``)."""
    return await db.storage.mailbox.claim_with_heads(
        owner=owner, limit=limit, lease_seconds=lease_seconds
    )


async def head_turn(db: Database, lease: Lease) -> QueuedTurn | None:
    """The identity's lowest unfinished turn if it is due, else ``None`` (drain stops)."""
    return await db.storage.mailbox.head_turn(lease)


async def begin_attempt(db: Database, lease: Lease, turn: QueuedTurn) -> bool:
    """``running`` and one more attempt, before anything else happens: a worker that dies
    mid-turn leaves ``running`` behind and its attempt has been counted."""
    return await db.storage.mailbox.begin_attempt(lease, turn)


async def settle(
    db: Database, lease: Lease, turn_id: int, status: str, *, error: str | None = None
) -> bool:
    """Final turn status: ``done`` | ``dead`` | ``canceled``."""
    return await db.storage.mailbox.settle(lease, turn_id, status, error=error)


async def settle_and_head(
    db: Database, lease: Lease, turn_id: int, status: str, *, error: str | None = None
) -> Settled:
    """``settle`` the turn, then read the identity's next head (``head_turn``)."""
    return await db.storage.mailbox.settle_and_head(lease, turn_id, status, error=error)


async def retry_later(
    db: Database, lease: Lease, turn_id: int, *, delay: float, error: str
) -> bool:
    """Back to ``queued``, not before ``now + delay`` (the identity's later turns wait)."""
    return await db.storage.mailbox.retry_later(lease, turn_id, delay=delay, error=error)


async def give_back(db: Database, lease: Lease, turn_id: int) -> bool:
    """Shutdown interrupted the turn: queue it again and do not count the attempt."""
    return await db.storage.mailbox.give_back(lease, turn_id)
