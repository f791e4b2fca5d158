"""A tool a plugin declares irreversible runs only with a negotiation agreed by reference
(research §2.4), on both backends."""

from __future__ import annotations

import asyncio
import time

from app.agents.llm.plugins import build_plugins
from app.agents.llm.tools import ToolContext
from app.db.engine import Database
from app.db.negotiations import ENDED, OUTBOUND, Change, NewNegotiation
from app.db.storage import open_storage
from app.negotiation.irreversible import KEY, with_gate


async def pay(amount: int, negotiation_id: str) -> str:
    """Pay."""
    return "paid"


class Payments:
    key = "payments"
    tools = (pay,)
    irreversible = ("pay",)


def _ctx(identity: str = "alice") -> ToolContext:
    return ToolContext(
        tenant="acme",
        identity_key=identity,
        task_id="t",
        call_id="c",
        idempotency_key="t:c",
        secrets={},
        cancelled=asyncio.Event(),
        clock=time.time,
    )


async def _settled(database: Database, key: str, intent: str, basis: str) -> str:
    store = open_storage(database).negotiations
    claim = await store.claim(
        NewNegotiation(
            id=key,
            tenant="acme",
            identity="alice",
            direction=OUTBOUND,
            counterparty="https://b.example/shop",
            intent=intent,
            origin_key=key,
        )
    )
    made = claim.negotiation
    done = await store.change(
        "acme", made.id, made.version, Change(state=ENDED, verdict="agreed", basis=basis)
    )
    assert done is not None
    return made.id


async def test_an_irreversible_tool_needs_an_agreement_by_reference(database: Database) -> None:
    store = open_storage(database).negotiations
    plugins = with_gate(build_plugins([Payments()], {}), store)
    [(plugin, hook)] = [(p, h) for p, h in plugins.hooks("before_tool_call")]
    assert plugin.key == KEY
    by_reference = await _settled(database, "n-ref", "bike", "reference")
    by_terms = await _settled(database, "n-terms", "desk", "terms")
    assert await hook(_ctx(), "pay", {"amount": 1, "negotiation_id": by_reference}) is None
    assert "agreed by reference" in await hook(_ctx(), "pay", {"negotiation_id": by_terms})
    assert "pass negotiation_id" in await hook(_ctx(), "pay", {"amount": 1})
    assert "No negotiation" in await hook(_ctx("bob"), "pay", {"negotiation_id": by_reference})
    assert await hook(_ctx(), "other_tool", {}) is None
    # No plugin declares an irreversible tool: no gate.
    plain = build_plugins([], {})
    assert with_gate(plain, store) is plain
