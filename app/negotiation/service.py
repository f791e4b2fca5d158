"""Negotiation as an ``llm`` turn extension (``app.agents.llm.extension``): the ``negotiate``
and ``answer`` tools for agents whose config enables negotiation, and the inbound turns a
peer's decision starts, answered by the negotiator instead of the loop."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence

import httpx2
from pydantic import BaseModel, ConfigDict, Field

from app.agents.contract import AgentResult, TurnContext
from app.agents.llm.config import LlmConfig
from app.agents.llm.plugins import PluginSet, maybe_await
from app.agents.llm.tools import Tool, ToolContext, ToolError, tool_from_function
from app.db.negotiations import (
    ENDED,
    INBOUND,
    OPEN,
    OUTBOUND,
    PARKED,
    Change,
    Negotiation,
    NegotiationStore,
    NewNegotiation,
)
from app.negotiation.decision import decision_of
from app.negotiation.digest import RECORDED, REFUSED, SKIPPED, Event, digest
from app.negotiation.inbound import InboundTurn
from app.negotiation.negotiator import Negotiator
from app.negotiation.outbound import Ours, Pump
from app.negotiation.peers import PeerClient, PeerError
from app.negotiation.record import record
from app.negotiation.settlement import Settlement, state_word
from app.security.token import PEER_PREFIX

log = logging.getLogger("looping.negotiation")

SETTLEMENT_NOTE = (
    " Outcomes: agreed (both closed on the same terms; only agreed by reference binds an "
    "irreversible act), conflict or unconfirmed (both said yes, but not verifiably to the same "
    "thing), unanswered (one side closed, the other did not — answer it, do not open a new one)."
)
PartyName = Callable[[str], Awaitable[str]]


class CounterpartyRef(BaseModel):
    """Another agent's edge: its origin and its tenant id there."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=2048)
    tenant: str = Field(min_length=1, max_length=63)


class NegotiationService:
    def __init__(
        self,
        store: NegotiationStore,
        peers: PeerClient,
        *,
        environ: Mapping[str, str],
        http: httpx2.AsyncClient | None,
        plugins: PluginSet,
        party_name: PartyName,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.peers = peers
        self.environ = environ
        self.http = http
        self.plugins = plugins
        self.party_name = party_name
        self.clock = clock

    # --- TurnExtension ----------------------------------------------------------------------

    def tools(self, config: LlmConfig) -> Sequence[Tool]:
        if not config.negotiates:
            return ()
        service = self

        async def negotiate(
            ctx: ToolContext, counterparty: CounterpartyRef, intent: str, opening: str
        ) -> str:
            """Negotiate with another agent on your party's behalf. ``counterparty``: its
            edge's origin (``url``) and its ``tenant`` there; ``intent``: what the negotiation
            serves (one live negotiation per counterparty and intent); ``opening``: your brief
            for the first move. Runs the exchange until it settles, needs your party, or runs
            out of turns, and returns one line per negotiation."""
            return await service.negotiate(config, ctx, counterparty, intent, opening)

        async def answer(ctx: ToolContext, ids: list[str], guidance: str) -> str:
            """Give your party's answer to negotiations waiting on it (or guidance for an
            unanswered one): ``ids`` from the negotiate digest, ``guidance`` their words. The
            guidance holds for the rest of each negotiation."""
            return await service.answer(config, ctx, ids, guidance)

        negotiate.__doc__ = (negotiate.__doc__ or "") + SETTLEMENT_NOTE
        return (
            tool_from_function(negotiate, sequential=True),
            tool_from_function(answer, sequential=True),
        )

    async def take_turn(self, config: LlmConfig, ctx: TurnContext) -> AgentResult | None:
        if not ctx.identity_key.startswith(PEER_PREFIX) or decision_of(ctx.message) is None:
            return None
        if not config.negotiates:
            return None
        turn = InboundTurn(
            store=self.store,
            negotiator=self._negotiator(config),
            config=config,
            ctx=ctx,
            party=await self.party_name(ctx.tenant),
            on_settled=self.on_settled,
        )
        return await turn.run()

    async def instructions(self, config: LlmConfig, ctx: TurnContext) -> str | None:
        """The record for a gateway caller's turn: their own outbound negotiations and every
        inbound one of the tenant (whose party they speak for)."""
        if not config.negotiates or ctx.identity_key.startswith(PEER_PREFIX):
            return None
        rows = await self.store.list_for(ctx.tenant)
        return record([r for r in rows if r.direction == INBOUND or r.identity == ctx.identity_key])

    # --- the tools --------------------------------------------------------------------------

    async def negotiate(
        self,
        config: LlmConfig,
        ctx: ToolContext,
        counterparty: CounterpartyRef,
        intent: str,
        opening: str,
    ) -> str:
        try:
            peer = self.peers.counterparty(counterparty.url, counterparty.tenant)
        except PeerError as exc:
            raise ToolError(str(exc)) from None
        claim = await self.store.claim(
            NewNegotiation(
                id=str(uuid.uuid4()),
                tenant=ctx.tenant,
                identity=ctx.identity_key,
                direction=OUTBOUND,
                counterparty=peer.key,
                intent=intent,
                origin_key=f"out:{ctx.idempotency_key}",
                objective=opening,
                detail={"url": peer.origin, "tenant": peer.tenant, "task": ctx.task_id},
            )
        )
        if claim.rival:
            return digest([_refused(claim.negotiation)])
        pump = await self._pump(config, ctx)
        return digest([await pump.run(claim.negotiation)])

    async def answer(
        self, config: LlmConfig, ctx: ToolContext, ids: list[str], guidance: str
    ) -> str:
        events = []
        for negotiation_id in dict.fromkeys(ids):
            events.append(await self._answer_one(config, ctx, negotiation_id, guidance))
        return digest(events)

    async def _answer_one(
        self, config: LlmConfig, ctx: ToolContext, negotiation_id: str, guidance: str
    ) -> Event:
        found = await self.store.get(ctx.tenant, negotiation_id)
        # Outbound negotiations are their caller's; inbound ones the tenant's party's.
        if found is None or (found.direction == OUTBOUND and found.identity != ctx.identity_key):
            return Event(SKIPPED, negotiation_id, reason=f'No negotiation "{negotiation_id}".')
        if found.state == ENDED:
            state = state_word(found.task_state or "") or "ended"
            return Event(
                SKIPPED,
                found.id,
                url=found.counterparty,
                reason=f"already ended ({state}) — open a new negotiation if the terms need "
                "to change.",
            )
        resumes = found.verdict == "unanswered" and not (found.reason or "").startswith("Out of")
        changed = await self.store.change(
            ctx.tenant,
            found.id,
            found.version,
            Change(
                state=OPEN if found.state == PARKED else None,
                guidance=(*found.guidance, guidance),
                clear_pending=True,
                clear_verdict=resumes,
            ),
        )
        if changed is None:
            return Event(SKIPPED, found.id, reason="the negotiation moved on; answer it again")
        if changed.direction == INBOUND:
            return Event(
                RECORDED,
                changed.id,
                url=changed.counterparty,
                reason="guidance kept; it goes out with the reply to their next move",
            )
        pump = await self._pump(config, ctx)
        return await pump.run(changed)

    async def _pump(self, config: LlmConfig, ctx: ToolContext) -> Pump:
        return Pump(
            store=self.store,
            peers=self.peers,
            negotiator=self._negotiator(config),
            config=config,
            ours=Ours(ctx.tenant, await self.party_name(ctx.tenant)),
            on_settled=self.on_settled,
            clock=self.clock,
        )

    def _negotiator(self, config: LlmConfig) -> Negotiator:
        return Negotiator(config, self.environ, self.http)

    async def on_settled(self, negotiation: Negotiation, settlement: Settlement) -> None:
        """The plugins' ``on_settled(negotiation, settlement)`` hooks, best effort."""
        for plugin, hook in self.plugins.hooks("on_settled"):
            try:
                await maybe_await(hook(negotiation, settlement))
            except Exception as exc:
                log.warning(
                    "negotiation.plugin_hook_failed",
                    extra={"plugin": plugin.key, "outcome": type(exc).__name__},
                )


def _refused(rival: Negotiation) -> Event:
    where = rival.verdict or ("waiting on your party" if rival.state == PARKED else "still open")
    return Event(
        REFUSED,
        rival.id,
        url=rival.counterparty,
        reason=(
            f"you already have negotiation {rival.id} with {rival.counterparty} about "
            f'"{rival.intent}" ({where}); answer or finish that one. Nothing was sent.'
        ),
    )
