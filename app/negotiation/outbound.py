"""Negotiations this edge opens (issue 51, outbound): the pump behind the ``negotiate`` and
``answer`` tools.

Each move is saved (``negotiation_turns``, way ``sent``) before it is sent, with the message id
it goes out under; a pump that finds its last move sent but unanswered (a crash, a takeover,
a lost connection) sends that same message again, which the counterparty's accept dedupes by
message id, so no move is ever sent twice as two moves. After every round trip both the task
and our row say where the exchange stands: ``settle`` runs on the task the counterparty
returned, a settled or spent negotiation stops, an ``ask`` parks it (nothing sent) until the
party's answer comes back through ``answer``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.agents.llm.config import LlmConfig
from app.db.negotiations import (
    ENDED,
    OPEN,
    PARKED,
    Change,
    Negotiation,
    NegotiationStore,
    TurnRecord,
)
from app.negotiation.decision import METADATA_KEY, decision_of, decisions_of
from app.negotiation.digest import ASKING, BUDGET, FAILED, SETTLED, Event, last_move
from app.negotiation.exchange import (
    last_offer,
    moves_of,
    reply_after,
    settled_change,
    task_state,
    user_moves,
)
from app.negotiation.inbound import OnSettled
from app.negotiation.negotiator import Negotiator, NegotiatorFailed, View, objective_of
from app.negotiation.peers import Counterparty, PeerCard, PeerClient, PeerError
from app.negotiation.settlement import settle
from app.negotiation.vocabulary import ASK, vocabulary_of


@dataclass(frozen=True)
class Ours:
    """Who we negotiate as: our tenant and its card's name."""

    tenant: str
    name: str


@dataclass
class Pump:
    store: NegotiationStore
    peers: PeerClient
    negotiator: Negotiator
    config: LlmConfig
    ours: Ours
    on_settled: OnSettled
    clock: Any

    def __post_init__(self) -> None:
        assert self.config.negotiation is not None
        self.vocabulary = vocabulary_of(self.config.negotiation)
        self.max_turns = self.config.negotiation.max_turns
        self._card: PeerCard | None = None

    def counterparty(self, negotiation: Negotiation) -> Counterparty:
        detail = negotiation.detail
        return self.peers.counterparty(str(detail.get("url")), str(detail.get("tenant")))

    async def run(self, negotiation: Negotiation) -> Event:
        try:
            return await self._run(negotiation)
        except (PeerError, NegotiatorFailed) as exc:
            return await self._failed(negotiation, str(exc))

    async def _run(self, negotiation: Negotiation) -> Event:
        while True:
            if negotiation.state == PARKED:
                return self._event(negotiation, ASKING)
            if negotiation.state == ENDED or negotiation.verdict is not None:
                kind = BUDGET if _out_of_turns(negotiation) else SETTLED
                return self._event(negotiation, kind)
            # The card first: a counterparty that cannot be verified never hears a move.
            card = await self._card_of(negotiation)
            turns = await self.store.turns(negotiation.tenant, negotiation.id)
            pending = turns[-1] if turns and turns[-1].way == "sent" else None
            if pending is None:
                moved = await self._move(negotiation, turns)
                if isinstance(moved, Event):
                    return moved
                if moved is None:
                    negotiation = await self._reread(negotiation)
                    continue
                negotiation, pending = moved
            changed = await self._round_trip(negotiation, pending, card)
            negotiation = changed if changed is not None else await self._reread(negotiation)

    async def _move(
        self, negotiation: Negotiation, turns: list[TurnRecord]
    ) -> tuple[Negotiation, TurnRecord] | Event | None:
        """Decide and save our next move; an ``ask`` parks instead (nothing is sent)."""
        history = [t.message for t in turns]
        view = View(
            party=self.ours.name,
            objective=objective_of(negotiation.intent, negotiation.objective, negotiation.guidance),
            moves=moves_of(history, responder=False),
            offered=self.vocabulary.offered(with_ask=True),
            now=self.clock(),
        )
        decision = await self.negotiator.decide(view)
        if decision.action == ASK:
            parked = await self.store.change(
                negotiation.tenant,
                negotiation.id,
                negotiation.version,
                Change(state=PARKED, pending=decision.message),
            )
            return self._event(parked, ASKING) if parked is not None else None
        decision = decision.with_offer_id()
        message: dict[str, Any] = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [decision.to_part()],
        }
        if negotiation.task_id is not None:
            message["taskId"] = negotiation.task_id
            message["contextId"] = negotiation.context_id
        else:
            message["metadata"] = {
                METADATA_KEY: {"intent": negotiation.intent, "maxTurns": self.max_turns}
            }
        record = TurnRecord(0, "sent", message["messageId"], message)
        saved = await self.store.change(
            negotiation.tenant,
            negotiation.id,
            negotiation.version,
            Change(state=OPEN, last_offer=last_offer(decision)),
            [record],
        )
        return (saved, record) if saved is not None else None

    async def _card_of(self, negotiation: Negotiation) -> PeerCard:
        if self._card is None:
            self._card = await self.peers.card(
                self.counterparty(negotiation), our_tenant=self.ours.tenant, our_name=self.ours.name
            )
        return self._card

    async def _round_trip(
        self, negotiation: Negotiation, pending: TurnRecord, card: PeerCard
    ) -> Negotiation | None:
        task = await self.peers.send(
            self.counterparty(negotiation),
            card,
            pending.message,
            our_tenant=self.ours.tenant,
            our_name=self.ours.name,
            history_length=4 * self.max_turns + 4,
        )
        return await self._take_reply(negotiation, pending, card, task)

    async def _take_reply(
        self,
        negotiation: Negotiation,
        pending: TurnRecord,
        card: PeerCard,
        task: dict[str, Any],
    ) -> Negotiation | None:
        """Settles the exchange on the peer's task after our move ``pending``: its reply is
        recorded with the new state, and a settlement is reported once stored."""
        history = [m for m in task.get("history") or () if isinstance(m, Mapping)]
        reply = reply_after(task, pending.message_id)
        mine = decision_of(pending.message)
        assert mine is not None
        theirs = decision_of(reply) if reply is not None else None
        state = task_state(task)
        settlement = settle(
            state,
            decisions_of(history),
            mine,
            theirs,
            mine_first=True,
            is_terminal=self.vocabulary.is_terminal,
        )
        sent = user_moves(history) or negotiation.turns + 1
        received = dict(reply) if reply is not None else {"parts": []}
        received_id = str(received.get("messageId") or f"none:{pending.message_id}")
        change = settled_change(
            state,
            settlement,
            turns=sent,
            budget_spent=sent >= self.max_turns,
            task_id=str(task.get("id")),
            context_id=str(task.get("contextId") or ""),
            last_offer=last_offer(theirs) or negotiation.last_offer,
            detail={
                **negotiation.detail,
                "peer": card.name,
                "last": theirs.to_data() if theirs is not None else None,
            },
        )
        changed = await self.store.change(
            negotiation.tenant,
            negotiation.id,
            negotiation.version,
            change,
            [TurnRecord(0, "received", received_id, received, reply_to=pending.message_id)],
        )
        if changed is not None and settlement is not None:
            await self.on_settled(changed, settlement)
        return changed

    async def _reread(self, negotiation: Negotiation) -> Negotiation:
        found = await self.store.get(negotiation.tenant, negotiation.id)
        if found is None:
            raise PeerError("the negotiation is gone")
        return found

    async def _failed(self, negotiation: Negotiation, error: str) -> Event:
        current = await self.store.get(negotiation.tenant, negotiation.id)
        if current is not None and current.task_id is None and not current.guidance:
            await self.store.drop(negotiation.tenant, negotiation.id)  # nothing left behind
        return Event(FAILED, negotiation.id, url=negotiation.counterparty, reason=error)

    def _event(self, negotiation: Negotiation | None, kind: str) -> Event:
        assert negotiation is not None
        theirs = _their_last(negotiation)
        return Event(
            kind,
            negotiation.id,
            peer=negotiation.detail.get("peer"),
            url=negotiation.counterparty,
            outcome=negotiation.verdict,
            terms=negotiation.terms,
            reason=negotiation.reason,
            question=negotiation.pending,
            last=theirs,
            turns=negotiation.turns,
        )


def _out_of_turns(negotiation: Negotiation) -> bool:
    return negotiation.verdict == "unanswered" and (negotiation.reason or "").startswith(
        "Out of turns"
    )


def _their_last(negotiation: Negotiation) -> str | None:
    last = negotiation.detail.get("last")
    if not isinstance(last, Mapping):
        return None
    terms = last.get("terms")
    return last_move(str(last.get("message")), terms if isinstance(terms, Mapping) else None)
