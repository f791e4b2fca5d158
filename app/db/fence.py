"""The fence a turn's writes carry (ARCHITECTURE, Durable execution: fenced writes).

A worker that claims an identity's lease bumps ``actors.fence`` and keeps the new value. Every
write the turn makes is conditioned, in the same SQL statement, on the actor row still holding
that fence, that owner and an unexpired lease, so a paused "zombie" worker that wakes up after
another worker took the lease over changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, exists, select

from app.db.models import ActorRow
from app.security.caller import CallerScope


@dataclass(frozen=True)
class Fence:
    owner: str  # lease owner (process owner string)
    token: int  # actors.fence value the worker got when claiming


# The same condition for hand-written PostgreSQL statements: parameters $1 tenant,
# $2 identity, $3 fence token, $4 lease owner.
FENCE_SQL = """EXISTS (
    SELECT 1 FROM actors a
     WHERE a.tenant = $1 AND a.identity = $2 AND a.fence = $3 AND a.lease_owner = $4
       AND a.lease_until > now())"""


def fence_params(scope: CallerScope, fence: Fence) -> tuple[str, str, int, str]:
    """``FENCE_SQL``'s parameters $1-$4, in its order: every fenced statement starts with them."""
    return scope.tenant, scope.identity, fence.token, fence.owner


def fence_holds(
    scope: CallerScope, fence: Fence, *, now: ColumnElement[Any]
) -> ColumnElement[bool]:
    """``EXISTS`` clause: the actor still holds ``fence`` under a lease unexpired at ``now``
    (the storage's clock, ``app.db.clock``)."""
    return exists(
        select(ActorRow.tenant).where(
            ActorRow.tenant == scope.tenant,
            ActorRow.identity == scope.identity,
            ActorRow.fence == fence.token,
            ActorRow.lease_owner == fence.owner,
            ActorRow.lease_until > now,
        )
    )
