"""A counterparty's move (issue 51, inbound), answered by the tenant's worker: the turn was
accepted durably like any other (``app.negotiation.gate`` claimed the negotiation); here the
negotiator decides the reply, and the decision is saved with its turn before the reply
leaves, so a retry of the same message or a takeover after a crash returns the saved reply
without asking the model again.

``ask`` goes to the peer as a normal non-terminal reply (research §3.5) and the question is
kept on the row; the party's standing guidance, once given with ``answer``, is part of the
objective of every later reply.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.agents.contract import AgentResult, TurnContext
from app.agents.llm.config import LlmConfig
from app.db.negotiations import (
    INBOUND,
    Change,
    Negotiation,
    NegotiationStore,
    NewNegotiation,
    TurnRecord,
)
from app.negotiation.decision import Decision, decision_of, decisions_of, intent_of
from app.negotiation.exchange import (
    last_offer,
    moves_of,
    result_of,
    settled_change,
    user_moves,
    written_state,
)
from app.negotiation.negotiator import Negotiator, View, objective_of
from app.negotiation.settlement import Settlement, settle
from app.negotiation.vocabulary import ASK, vocabulary_of

log = logging.getLogger("looping.negotiation")

OnSettled = Callable[[Negotiation, Settlement], Awaitable[None]]


def counterparty_of(identity_key: str) -> str:
    """``peer:<origin>:<key>`` → ``<origin>/<key>`` (their tenant): the table's name for it."""
    body = identity_key.removeprefix("peer:")
    origin, _, key = body.rpartition(":")
    return f"{origin}/{key}"


def max_turns_of(first: Mapping[str, Any], default: int) -> int:
    """The initiator's budget when its first message names one (``maxTurns``), else ours: both
    sides then call the same round trip the last."""
    meta = first.get("metadata")
    block = meta.get("io.looping.negotiation") if isinstance(meta, Mapping) else None
    value = block.get("maxTurns") if isinstance(block, Mapping) else None
    # Protobuf's Struct carries every number as a double.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 0 < value <= 100 else default


@dataclass
class InboundTurn:
    store: NegotiationStore
    negotiator: Negotiator
    config: LlmConfig
    ctx: TurnContext
    party: str
    on_settled: OnSettled

    async def run(self) -> AgentResult:
        incoming = decision_of(self.ctx.message)
        assert incoming is not None and self.config.negotiation is not None
        message_id = str(self.ctx.message.get("messageId") or "")
        negotiation = await self._negotiation()
        for _ in range(3):
            saved = await self._saved(negotiation, message_id)
            if saved is not None:
                return saved
            done = await self._answer(negotiation, incoming, message_id)
            if done is not None:
                return done
            # Another holder of this task's turn wrote first: read what it saved.
            found = await self.store.get(self.ctx.tenant, negotiation.id)
            assert found is not None
            negotiation = found
        raise RuntimeError("negotiation row keeps changing under this turn")

    async def _negotiation(self) -> Negotiation:
        ctx = self.ctx
        found = await self.store.by_task(ctx.tenant, ctx.identity_key, ctx.task_id)
        if found is not None:
            return found
        # The accept's claim did not get its task id (a crash in between): claim it again
        # under the same key, which returns that row.
        first = self._history()[0]
        claim = await self.store.claim(
            NewNegotiation(
                id=ctx.task_id,
                tenant=ctx.tenant,
                identity=ctx.identity_key,
                direction=INBOUND,
                counterparty=counterparty_of(ctx.identity_key),
                intent=intent_of(first) or "",
                origin_key=f"in:{first.get('messageId')}",
                task_id=ctx.task_id,
                context_id=ctx.context_id,
            )
        )
        return claim.negotiation

    def _history(self) -> list[Mapping[str, Any]]:
        history: list[Mapping[str, Any]] = [m for m in self.ctx.history if isinstance(m, Mapping)]
        mid = self.ctx.message.get("messageId")
        if not any(m.get("messageId") == mid for m in history):
            history.append(self.ctx.message)
        return history

    async def _saved(self, negotiation: Negotiation, message_id: str) -> AgentResult | None:
        for turn in await self.store.turns(self.ctx.tenant, negotiation.id):
            if turn.way == "sent" and turn.reply_to == message_id:
                decision = decision_of(turn.message)
                state = str(turn.message.get("state") or "")
                if decision is not None and state:
                    return result_of(decision, state)
        return None

    async def _answer(
        self, negotiation: Negotiation, incoming: Decision, message_id: str
    ) -> AgentResult | None:
        """Decide the reply and save it with its turn (``None``: another holder wrote first)."""
        assert self.config.negotiation is not None
        vocabulary = vocabulary_of(self.config.negotiation)
        history = self._history()
        view = View(
            party=self.party,
            objective=objective_of(negotiation.intent, None, negotiation.guidance),
            moves=moves_of(history, responder=True),
            offered=vocabulary.offered(with_ask=True),
            now=self.ctx.clock(),
        )
        reply = (await self.negotiator.decide(view)).with_offer_id()
        state = written_state(vocabulary.task_state(reply.action))
        settlement = settle(
            state,
            [*decisions_of(history), reply],
            reply,
            incoming,
            mine_first=False,
            is_terminal=vocabulary.is_terminal,
        )
        change = self._change(negotiation, history, reply, state, settlement)
        sent = {
            "messageId": f"reply:{message_id}",
            "role": "ROLE_AGENT",
            "parts": [reply.to_part()],
            "state": state,
        }
        updated = await self.store.change(
            self.ctx.tenant,
            negotiation.id,
            negotiation.version,
            change,
            [
                TurnRecord(0, "received", message_id, dict(self.ctx.message)),
                TurnRecord(0, "sent", f"reply:{message_id}", sent, reply_to=message_id),
            ],
        )
        if updated is None:
            return None
        if settlement is not None:
            await self.on_settled(updated, settlement)
        return result_of(reply, state)

    def _change(
        self,
        negotiation: Negotiation,
        history: Sequence[Mapping[str, Any]],
        reply: Decision,
        state: str,
        settlement: Settlement | None,
    ) -> Change:
        """The row after this reply: the budget is the initiator's when it named one."""
        assert self.config.negotiation is not None
        moves = user_moves(history)
        named = negotiation.detail.get("max_turns")
        limit = (
            named
            if isinstance(named, int)
            else max_turns_of(history[0], self.config.negotiation.max_turns)
        )
        asked = reply.action == ASK
        return settled_change(
            state,
            settlement,
            turns=moves,
            budget_spent=moves >= limit,
            task_id=self.ctx.task_id,
            context_id=self.ctx.context_id,
            last_offer=last_offer(reply) or negotiation.last_offer,
            pending=reply.message if asked else None,
            clear_pending=not asked,
        )
