"""What the accept path asks before a ``SendMessage`` that carries a decision data part
(issue 51): such a message is a negotiation turn only from a peer edge's token (a gateway
caller's is ``-32602``), only for a tenant whose agent negotiates, and a negotiation's first
message claims the negotiation under the rival rule first (``-32004`` with reason
``negotiation_rival`` while a binding one holds the same peer and intent).

The claim is made before the task exists and gets its task id once the accept succeeded; an
accept that fails drops a claim it made, so a refused message leaves nothing behind. A claim
left without a task by a process that died in between is dropped once it is older than
``ORPHAN_SECONDS`` when a later first message meets it; one whose task ended without a reply
(canceled by the peer, failed) is closed as ``declined`` then, as ``verify_agreement`` reads
such a task.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.db.negotiations import (
    ENDED,
    INBOUND,
    OPEN,
    Change,
    Claim,
    Negotiation,
    NegotiationStore,
    NewNegotiation,
)
from app.db.states import CANCELED, FAILED, REJECTED
from app.db.tenants import TenantRecord
from app.errors import InvalidParams, UnsupportedOperation
from app.negotiation.decision import DecisionError, decision_from_data, decision_part, intent_of
from app.negotiation.inbound import counterparty_of, max_turns_of
from app.negotiation.settlement import state_word
from app.security.caller import CallerScope

ORPHAN_SECONDS = 60.0  # far past any accept: its claim never got its task


def negotiates(tenant: TenantRecord) -> bool:
    block = tenant.agent_config.get("negotiation") if tenant.agent_kind == "llm" else None
    return isinstance(block, Mapping) and block.get("enabled") is True


@dataclass(frozen=True)
class Pending:
    """A negotiation turn on its way in; ``claim``: the first message's claim."""

    claim: Claim | None


TaskState = Callable[[CallerScope, str], Awaitable[str | None]]
_ENDED_WITHOUT_REPLY = frozenset({CANCELED, FAILED, REJECTED})


class NegotiationGate:
    """``task_state``: the task store's read of a task's state in a caller's scope."""

    def __init__(self, store: NegotiationStore, task_state: TaskState) -> None:
        self._store = store
        self._task_state = task_state

    async def check(
        self,
        *,
        peer: bool,
        tenant: TenantRecord,
        identity: str,
        message: Mapping[str, Any],
        task_id: str | None,
    ) -> Pending | None:
        """``None``: not a negotiation turn (the message carries no decision)."""
        data = decision_part(message)
        if data is None:
            return None
        if not peer:
            raise InvalidParams(
                "a decision data part is a negotiation turn, accepted only from a peer edge",
                reason="negotiation_not_peer",
            )
        if not negotiates(tenant):
            raise UnsupportedOperation(
                "this tenant does not negotiate", reason="negotiation_disabled"
            )
        try:
            decision_from_data(data)
        except DecisionError as exc:
            raise InvalidParams(str(exc), reason="bad_decision") from None
        if task_id is not None:
            return Pending(None)
        new = NewNegotiation(
            id=str(uuid.uuid4()),
            tenant=tenant.id,
            identity=identity,
            direction=INBOUND,
            counterparty=counterparty_of(identity),
            intent=intent_of(message) or "",
            origin_key=f"in:{message.get('messageId')}",
            detail={"max_turns": max_turns_of(message, 0) or None},
        )
        claim = await self._store.claim(new)
        if claim.rival and await self._stale(claim.negotiation):
            claim = await self._store.claim(new)
        if claim.rival:
            raise UnsupportedOperation(
                "this agent already has a negotiation with you on the same intent that is "
                f"still open or closed as a deal ({claim.negotiation.id}); finish that one "
                "first",
                reason="negotiation_rival",
            )
        return Pending(claim)

    async def _stale(self, rival: Negotiation) -> bool:
        """Whether the rival no longer stands (and is now out of the way)."""
        if _orphaned(rival):
            return await self._store.drop(rival.tenant, rival.id)
        if rival.direction != INBOUND or rival.task_id is None or rival.verdict is not None:
            return False
        state = await self._task_state(CallerScope(rival.tenant, rival.identity), rival.task_id)
        if state not in _ENDED_WITHOUT_REPLY:
            return False
        ended = await self._store.change(
            rival.tenant,
            rival.id,
            rival.version,
            Change(
                state=ENDED,
                task_state=state,
                verdict="declined",
                basis="state",
                reason=f"task ended as {state_word(state)}",
            ),
        )
        return ended is not None

    async def accepted(self, pending: Pending, tenant: str, task_id: str, context_id: str) -> None:
        claim = pending.claim
        if claim is None or claim.negotiation.task_id is not None:
            return
        made = claim.negotiation
        await self._store.change(
            tenant,
            made.id,
            made.version,
            Change(state=OPEN, task_id=task_id, context_id=context_id),
        )

    async def refused(self, pending: Pending, tenant: str) -> None:
        if pending.claim is not None and pending.claim.created:
            await self._store.drop(tenant, pending.claim.negotiation.id)


def _orphaned(rival: Negotiation) -> bool:
    """An inbound claim whose accept never gave it a task (its process died in between)."""
    if rival.direction != INBOUND or rival.task_id is not None or rival.updated_at is None:
        return False
    updated = rival.updated_at
    if updated.tzinfo is None:  # SQLite hands timestamps back naive (they are UTC)
        updated = updated.replace(tzinfo=UTC)
    return datetime.now(UTC) - updated > timedelta(seconds=ORPHAN_SECONDS)
