"""The negotiations store (issue 51): one row per negotiation, both directions, and its
turns (``negotiation_turns``), read and written in one tenant's scope.

The rival rule is the schema's: a unique partial index over ``(tenant, identity,
counterparty, intent)`` on the *binding* rows (still open, or closed as a deal), so two claims
racing for one key cannot both win (``claim`` returns the binding row instead). Every change
is a compare-and-set on ``version``, so two concurrent continuations of one negotiation
serialise (the loser re-reads), and none applies to a negotiation that has ``ended``: a
closed negotiation is never reopened.

``NegotiationStore`` is the role; ``app.db.shared.negotiations`` plays it on both backends,
chosen once in ``app.db.storage``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

JsonDict = dict[str, Any]

INBOUND = "inbound"
OUTBOUND = "outbound"
# Negotiation states: nothing sent yet, going, waiting on the party, over.
OPENING = "opening"
OPEN = "open"
PARKED = "parked"
ENDED = "ended"
STATES = (OPENING, OPEN, PARKED, ENDED)
VERDICTS = ("agreed", "declined", "conflict", "unconfirmed", "unanswered")
# What no longer binds the party: a negotiation that ended without a deal.
NOT_BINDING = frozenset({"declined", "conflict"})


def binds(verdict: str | None) -> bool:
    """Open, or closed as a deal (research §3.4): such a negotiation blocks a rival."""
    return verdict not in NOT_BINDING


@dataclass(frozen=True)
class Negotiation:
    id: str
    tenant: str
    identity: str
    direction: str
    counterparty: str
    intent: str
    origin_key: str  # outbound: the opening tool call's key; inbound: the first message id
    state: str
    turns: int
    binding: bool
    version: int
    task_id: str | None = None
    context_id: str | None = None
    task_state: str | None = None
    last_offer: JsonDict | None = None
    verdict: str | None = None
    basis: str | None = None
    reason: str | None = None
    terms: JsonDict | None = None
    pending: str | None = None
    guidance: tuple[str, ...] = ()
    objective: str | None = None
    detail: JsonDict = field(default_factory=dict)
    updated_at: datetime | None = None


@dataclass(frozen=True)
class NewNegotiation:
    id: str
    tenant: str
    identity: str
    direction: str
    counterparty: str
    intent: str
    origin_key: str
    objective: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    detail: JsonDict = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    """``created``: this claim made the row. ``rival``: the binding negotiation that refused
    it (then ``negotiation`` is that rival)."""

    negotiation: Negotiation
    created: bool
    rival: bool = False


@dataclass(frozen=True)
class TurnRecord:
    """One move: ``sent`` (ours) or ``received`` (theirs); ``message`` is the A2A message as
    it went over the wire (protobuf JSON); ``reply_to``: the message id it answers."""

    seq: int
    way: str
    message_id: str
    message: JsonDict
    reply_to: str | None = None


@dataclass(frozen=True)
class Change:
    """Fields a compare-and-set writes (``None``: unchanged; ``clear_pending`` drops the
    question). ``verdict`` recomputes ``binding``."""

    state: str | None = None
    turns: int | None = None
    task_id: str | None = None
    context_id: str | None = None
    task_state: str | None = None
    last_offer: JsonDict | None = None
    verdict: str | None = None
    basis: str | None = None
    reason: str | None = None
    terms: JsonDict | None = None
    pending: str | None = None
    clear_pending: bool = False
    clear_verdict: bool = False  # an unanswered exchange moves on: binding, no verdict
    guidance: tuple[str, ...] | None = None
    detail: Mapping[str, Any] | None = None


class NegotiationStore(Protocol):
    async def claim(self, new: NewNegotiation) -> Claim:
        """Insert ``new`` unless a row with its ``origin_key`` exists (then that row, a
        resumed claim) or a binding rival holds its key (then the rival, ``rival=True``)."""
        ...

    async def get(self, tenant: str, negotiation_id: str) -> Negotiation | None: ...

    async def by_task(self, tenant: str, identity: str, task_id: str) -> Negotiation | None: ...

    async def list_for(self, tenant: str, identity: str | None = None) -> list[Negotiation]:
        """Oldest update first (research §3.2: most recently updated last)."""
        ...

    async def change(
        self,
        tenant: str,
        negotiation_id: str,
        version: int,
        change: Change,
        turns: Sequence[TurnRecord] = (),
    ) -> Negotiation | None:
        """Apply ``change`` and append ``turns`` in one transaction if the row is still at
        ``version`` and has not ended; ``None`` otherwise (nothing written)."""
        ...

    async def turns(self, tenant: str, negotiation_id: str) -> list[TurnRecord]: ...

    async def drop(self, tenant: str, negotiation_id: str) -> bool:
        """Forget a negotiation that never reached the counterparty (still ``opening``, no
        task): a failed open leaves nothing behind."""
        ...
