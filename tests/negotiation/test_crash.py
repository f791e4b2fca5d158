"""kill -9 of either side's worker mid-negotiation (real processes, PostgreSQL): no turn is
lost and none is sent twice; both sides still record the same verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from app.db.storage import open_storage
from app.testing.fake_model import FakeModelServer, text, tool_call
from app.testing.tenants import add_tenant_at, open_tenant
from tests.e2e.processes import until
from tests.negotiation.kit import accepting, decision, llm_config
from tests.negotiation.processes import TwoEdges, two_edge_processes

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
BIKE = {"amount": 450, "currency": "USD"}


def _negotiate(b_url: str) -> Any:
    return tool_call(
        "negotiate",
        {
            "counterparty": {"url": b_url, "tenant": "seller"},
            "intent": "buy the bike",
            "opening": "At most $500.",
        },
        call_id="neg",
    )


async def _rows(url: str, tenant: str) -> list[Any]:
    db = Database(url)
    try:
        return await open_storage(db).negotiations.list_for(tenant)
    finally:
        await db.dispose()


async def _their_task(url: str, task_id: str) -> list[dict[str, Any]]:
    db = Database(url)
    try:
        rows = await open_storage(db).negotiations.list_for("seller")
        [row] = rows
        assert row.task_id == task_id
        return [t.message for t in await open_storage(db).negotiations.turns("seller", row.id)]
    finally:
        await db.dispose()


async def _setup(edges: TwoEdges, url_a: str, url_b: str, fa: str, fb: str) -> None:
    await add_tenant_at(
        url_a, open_tenant("buyer", agent="llm", agent_config=llm_config(fa), name="Buyer")
    )
    await add_tenant_at(
        url_b, open_tenant("seller", agent="llm", agent_config=llm_config(fb), name="Seller")
    )


async def _check_agreed(url_a: str, url_b: str) -> None:
    [ours] = await _rows(url_a, "buyer")
    [theirs] = await _rows(url_b, "seller")
    for row in (ours, theirs):
        assert (row.verdict, row.basis, row.terms) == ("agreed", "reference", BIKE), row
    assert ours.task_id == theirs.task_id and ours.turns == theirs.turns == 2
    received = [
        m for m in await _their_task(url_b, str(theirs.task_id)) if m.get("role") == "ROLE_USER"
    ]
    assert len(received) == len({m["messageId"] for m in received}) == 2  # none sent twice


@pytest.mark.parametrize("side", ["a", "b"])
async def test_kill_9_of_a_worker_mid_negotiation(
    side: str, pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        async with two_edge_processes(
            pg_url, second_pg_url, tmp_path, lease_seconds=2, blocking_timeout_seconds=2
        ) as edges:
            move_two = accepting("Deal at $450.", with_terms=True)
            fake_a.script(
                _negotiate(edges.b.url),
                decision("propose", "$400?", {"amount": 400, "currency": "USD"}),
            )
            if side == "a":
                fake_a.script(text("{}", delay=60))  # killed while deciding move two
            fake_a.script(move_two, text("Bought it."))
            if side == "b":
                fake_b.script(text("{}", delay=60))  # killed while deciding its reply
            fake_b.script(decision("counter", "$450.", BIKE), accepting("Deal."))
            await _setup(edges, pg_url, second_pg_url, fake_a.base_url, fake_b.base_url)
            import asyncio

            sending = asyncio.create_task(
                edges.send({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Buy it."}]})
            )
            fake, edge, seen = (fake_a, edges.a, 3) if side == "a" else (fake_b, edges.b, 1)

            async def delayed_asked() -> bool | None:
                return True if len(fake.requests) >= seen else None

            await until(delayed_asked, *[w for w in edge.workers], within=60)
            edge.workers[0].kill9()
            edge.start_worker()
            task = await asyncio.wait_for(sending, 120)
            if task["status"]["state"] != "TASK_STATE_COMPLETED":
                # The gateway's blocking call ended before the takeover finished: read it again.
                async def completed() -> bool | None:
                    rows = await _rows(pg_url, "buyer")
                    return True if rows and rows[0].verdict else None

                await until(completed, within=60)
            await _check_agreed(pg_url, second_pg_url)
            assert len(fake_b.requests) == (3 if side == "b" else 2)


async def test_verdicts_agree_across_two_edge_processes(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    """Conflict on terms, declined and a prose conflict between two real edges: each side's
    row records the same verdict and basis."""
    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        async with two_edge_processes(pg_url, second_pg_url, tmp_path) as edges:
            cases = [
                ("terms", ("conflict", "terms")),
                ("refused", ("declined", "state")),
                ("prose", ("conflict", "prose")),
            ]
            for intent, _ in cases:
                fake_a.script(
                    tool_call(
                        "negotiate",
                        {
                            "counterparty": {"url": edges.b.url, "tenant": "seller"},
                            "intent": intent,
                            "opening": "go",
                        },
                        call_id=f"n-{intent}",
                    )
                )
                if intent == "terms":
                    fake_a.script(decision("propose", "$450 Wed.", {"amount": 450, "day": "Wed"}))
                    fake_b.script(decision("accept", "Sat.", {"amount": 450, "day": "Sat"}))
                elif intent == "refused":
                    fake_a.script(decision("propose", "$300?", {"amount": 300}))
                    fake_b.script(decision("reject", "No."))
                else:
                    fake_a.script(decision("accept", "Fine, $460."))
                    fake_b.script(decision("accept", "Agreed at $450."))
                fake_a.script(text("done"))
            await _setup(edges, pg_url, second_pg_url, fake_a.base_url, fake_b.base_url)
            for intent, _ in cases:
                message = {"messageId": intent, "role": "ROLE_USER", "parts": [{"text": intent}]}
                task = await edges.send(message)
                assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            ours = {r.intent: r for r in await _rows(pg_url, "buyer")}
            theirs = {r.intent: r for r in await _rows(second_pg_url, "seller")}
            for intent, expected in cases:
                for row in (ours[intent], theirs[intent]):
                    assert (row.verdict, row.basis) == expected, row
                assert ours[intent].task_id == theirs[intent].task_id


async def test_parked_and_resumed_across_two_edge_processes(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    from tests.negotiation.test_two_edges import _answer_waiting

    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        async with two_edge_processes(pg_url, second_pg_url, tmp_path) as edges:
            fake_a.script(
                _negotiate(edges.b.url),
                decision("ask", "What is the most I may pay?"),
                tool_call("ask_user", {"question": "What is the most I may pay?"}, call_id="q"),
                _answer_waiting("At most $460."),
                decision("propose", "$450 for the bike.", BIKE),
                text("Bought it for $450."),
            )
            fake_b.script(accepting("Deal."))
            await _setup(edges, pg_url, second_pg_url, fake_a.base_url, fake_b.base_url)
            first = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Buy it."}]}
            task = await edges.send(first)
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
            [parked] = await _rows(pg_url, "buyer")
            assert parked.state == "parked" and fake_b.requests == []
            answer = {
                "messageId": "m2",
                "role": "ROLE_USER",
                "taskId": task["id"],
                "parts": [{"text": "At most $460."}],
            }
            done = await edges.send(answer)
            assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
            [ours] = await _rows(pg_url, "buyer")
            [theirs] = await _rows(second_pg_url, "seller")
            for row in (ours, theirs):
                assert (row.verdict, row.basis, row.terms) == ("agreed", "reference", BIKE)
