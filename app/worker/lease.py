"""Identity leases (ARCHITECTURE, Durable execution: claim, heartbeat, release), as the worker
calls them: each function is one unit of work of the storage's mailbox store
(``app.db.mailbox.MailboxStore``, where the claim's rules and both backends' statements are).
"""

from __future__ import annotations

from collections.abc import Iterable

from app.db.engine import Database
from app.db.mailbox import Lease as Lease
from app.db.states import UNFINISHED_TURNS
from app.security.caller import CallerScope

UNFINISHED = UNFINISHED_TURNS


async def claim(db: Database, *, owner: str, limit: int, lease_seconds: float) -> list[Lease]:
    """Claim up to ``limit`` identities with due work; returns the new leases."""
    return await db.storage.mailbox.claim(owner=owner, limit=limit, lease_seconds=lease_seconds)


async def extend(db: Database, leases: Iterable[Lease], *, lease_seconds: float) -> set[Lease]:
    """Heartbeat: push ``lease_until`` forward for every lease whose fence still matches.
    Returns the leases that were extended; any other one was lost (taken over after expiry)."""
    return await db.storage.mailbox.extend(leases, lease_seconds=lease_seconds)


async def release(db: Database, lease: Lease) -> bool:
    """Give the identity back (only if still ours): the next claim may come from anyone."""
    return await db.storage.mailbox.release(lease)


async def still_held(db: Database, lease: Lease) -> bool:
    """Whether the lease is still ours and unexpired (to tell "fence lost" from "task closed"
    after a guarded write was refused)."""
    return await db.storage.mailbox.still_held(lease)


async def task_states(
    db: Database, keys: Iterable[tuple[CallerScope, str]]
) -> dict[tuple[CallerScope, str], str]:
    """Current ``tasks.state`` of ``(scope, task id)`` pairs (the heartbeat's cancel check)."""
    return await db.storage.mailbox.task_states(keys)
