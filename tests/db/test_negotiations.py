"""The negotiations store on both backends: the rival rule as a claim, resumed claims,
compare-and-set changes that serialise, a closed negotiation never reopened."""

from __future__ import annotations

import asyncio
import uuid

from app.db.engine import Database
from app.db.negotiations import (
    ENDED,
    OPEN,
    OUTBOUND,
    Change,
    NewNegotiation,
    TurnRecord,
)
from app.db.storage import open_storage


def _new(origin_key: str, *, intent: str = "buy bike", identity: str = "alice") -> NewNegotiation:
    return NewNegotiation(
        id=str(uuid.uuid4()),
        tenant="acme",
        identity=identity,
        direction=OUTBOUND,
        counterparty="https://b.example/shop",
        intent=intent,
        origin_key=origin_key,
    )


async def test_a_second_binding_claim_is_refused_and_names_the_first(database: Database) -> None:
    store = open_storage(database).negotiations
    first = await store.claim(_new("call-1"))
    assert first.created and not first.rival
    second = await store.claim(_new("call-2"))
    assert second.rival and second.negotiation.id == first.negotiation.id
    # Another intent, another identity: no rival.
    assert (await store.claim(_new("call-3", intent="buy desk"))).created
    assert (await store.claim(_new("call-4", identity="bob"))).created
    # The same call again resumes its own claim.
    again = await store.claim(_new("call-1"))
    assert not again.created and not again.rival and again.negotiation.id == first.negotiation.id


async def test_concurrent_rival_claims_let_exactly_one_win(database: Database) -> None:
    store = open_storage(database).negotiations
    claims = await asyncio.gather(*(store.claim(_new(f"race-{i}")) for i in range(8)))
    winners = [c for c in claims if c.created]
    assert len(winners) == 1
    assert all(c.rival and c.negotiation.id == winners[0].negotiation.id for c in claims if c.rival)


async def test_a_declined_negotiation_frees_the_key_and_a_deal_keeps_it(database: Database) -> None:
    store = open_storage(database).negotiations
    first = (await store.claim(_new("c1"))).negotiation
    ended = await store.change(
        "acme", first.id, first.version, Change(state=ENDED, verdict="declined", basis="state")
    )
    assert ended is not None and not ended.binding and ended.verdict == "declined"
    second = await store.claim(_new("c2"))
    assert second.created
    deal = await store.change(
        "acme",
        second.negotiation.id,
        second.negotiation.version,
        Change(state=ENDED, verdict="agreed", basis="reference", terms={"amount": 450}),
    )
    assert deal is not None and deal.binding
    assert (await store.claim(_new("c3"))).rival


async def test_changes_serialise_and_an_ended_negotiation_is_never_reopened(
    database: Database,
) -> None:
    store = open_storage(database).negotiations
    made = (await store.claim(_new("c1"))).negotiation
    turn = TurnRecord(0, "sent", "m1", {"messageId": "m1", "parts": []})
    results = await asyncio.gather(
        store.change("acme", made.id, made.version, Change(state=OPEN, turns=1), [turn]),
        store.change("acme", made.id, made.version, Change(state=OPEN, turns=1), [turn]),
    )
    assert sum(r is not None for r in results) == 1
    now = next(r for r in results if r is not None)
    assert now.turns == 1 and now.version == made.version + 1
    assert [t.message_id for t in await store.turns("acme", made.id)] == ["m1"]
    closed = await store.change("acme", made.id, now.version, Change(state=ENDED, verdict="agreed"))
    assert closed is not None
    assert await store.change("acme", made.id, closed.version, Change(state=OPEN)) is None
    assert (await store.get("acme", made.id)).state == ENDED  # type: ignore[union-attr]


async def test_reads_stay_in_the_tenant_and_a_failed_open_leaves_nothing(
    database: Database,
) -> None:
    store = open_storage(database).negotiations
    made = (await store.claim(_new("c1"))).negotiation
    assert await store.get("other", made.id) is None
    assert await store.list_for("other") == []
    with_task = await store.change("acme", made.id, made.version, Change(task_id="t-1"))
    assert with_task is not None
    assert (await store.by_task("acme", "alice", "t-1")).id == made.id  # type: ignore[union-attr]
    assert await store.by_task("acme", "bob", "t-1") is None
    # Reached the counterparty (a task exists): not dropped.
    assert await store.drop("acme", made.id) is False
    lone = (await store.claim(_new("c2", intent="other"))).negotiation
    assert await store.drop("acme", lone.id) is True
    assert [n.id for n in await store.list_for("acme")] == [made.id]


async def test_a_peer_pin_is_the_first_one_and_racing_first_uses_agree(
    database: Database,
) -> None:
    pins = open_storage(database).peer_pins
    assert await pins.pinned("https://b.example") is None
    results = await asyncio.gather(
        *(pins.pin("https://b.example", f"https://b.example/jwks-{i}", "k") for i in range(4))
    )
    assert len(set(results)) == 1
    assert await pins.pinned("https://b.example") == results[0]
    assert await pins.pin("https://b.example", "https://b.example/other", "k2") == results[0]


async def test_pins_are_listed_and_one_removed_is_pinned_anew(database: Database) -> None:
    """After a peer's key rotation the operator removes its pin; the next first use pins."""
    pins = open_storage(database).peer_pins
    await pins.pin("https://b.example", "https://b.example/jwks", "k1")
    await pins.pin("https://a.example", "https://a.example/jwks", "k1")
    assert [(p.origin, p.kid) for p in await pins.all()] == [
        ("https://a.example", "k1"),
        ("https://b.example", "k1"),
    ]
    assert await pins.remove("https://b.example") is True
    assert await pins.remove("https://b.example") is False
    assert await pins.pinned("https://b.example") is None
    new = ("https://b.example/jwks", "k2")
    assert await pins.pin("https://b.example", *new) == new
