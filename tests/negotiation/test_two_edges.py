"""Two edges negotiate through the fake model server (issue 51, "Done when"): each side's
row records the same verdict; the loop learns the digest."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.db.storage import open_storage
from app.testing.edge import EdgeHarness, demo_manifest
from app.testing.fake_model import FakeModelServer, dynamic, text, tool_call
from tests.negotiation.kit import ORIGIN_B, accepting, decision, llm_config, two_edges

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
BIKE = {"amount": 450, "currency": "USD"}


def _negotiate(intent: str = "buy the bike", call_id: str | None = None) -> Any:
    return tool_call(
        "negotiate",
        {
            "counterparty": {"url": ORIGIN_B, "tenant": "seller"},
            "intent": intent,
            "opening": "Buy Sam's bike for at most $500.",
        },
        call_id=call_id,
    )


async def _ask(edge: EdgeHarness, text_: str, message_id: str = "m1") -> dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text_}]}
    result = await edge.result("SendMessage", {"message": message}, tenant="buyer")
    return dict(result.get("task", result))


async def _setup(
    edges: Any, fake_a: FakeModelServer, fake_b: FakeModelServer, **negotiation: Any
) -> None:
    await edges.a.add_tenant(
        "buyer",
        manifest=demo_manifest("Buyer"),
        agent="llm",
        agent_config=llm_config(fake_a.base_url, **negotiation),
        profile="open",
        require_push_config=False,
    )
    await edges.b.add_tenant(
        "seller",
        manifest=demo_manifest("Seller"),
        agent="llm",
        agent_config=llm_config(fake_b.base_url),
        profile="open",
        require_push_config=False,
    )


async def _rows(edge: EdgeHarness, tenant: str) -> list[Any]:
    return await open_storage(edge.services.db).negotiations.list_for(tenant)


def _tool_result(fake: FakeModelServer) -> str:
    for request in reversed(fake.requests):
        for message in reversed(request.messages):
            if message.get("role") == "tool":
                return str(message.get("content"))
    raise AssertionError("no tool result reached the model")


async def test_agreed_by_reference(pg_url: str, second_pg_url: str) -> None:
    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        fake_a.script(
            _negotiate(),
            decision("propose", "I offer $400 for the bike.", {"amount": 400, "currency": "USD"}),
            accepting("Deal at $450.", with_terms=True),
            text("Bought the bike for $450."),
        )
        fake_b.script(
            decision("counter", "I can do $450.", BIKE),
            accepting("Deal.", with_terms=False),
        )
        async with two_edges(pg_url, second_pg_url) as edges:
            await _setup(edges, fake_a, fake_b)
            task = await _ask(edges.a, "Buy Sam's bike.")
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            digest = _tool_result(fake_a)
            assert "Settled (1):" in digest and 'agreed: {"amount":450,"currency":"USD"}' in digest
            [ours] = await _rows(edges.a, "buyer")
            [theirs] = await _rows(edges.b, "seller")
            for row in (ours, theirs):
                assert (row.verdict, row.basis, row.terms) == ("agreed", "reference", BIKE)
                assert row.task_id == theirs.task_id and row.state == "ended"
            assert ours.direction == "outbound" and theirs.direction == "inbound"
            assert theirs.counterparty == "http://127.0.0.1:7101/buyer"
            assert ours.counterparty == "http://127.0.0.1:7102/seller"
            # The negotiator calls are JSON mode, no tools, the prompt as system message.
            call = fake_b.requests[0].body
            assert call["response_format"] == {"type": "json_object"} and "tools" not in call
            assert call["messages"][0]["content"].startswith("You negotiate carefully.")


async def _run(
    pg_url: str, second_pg_url: str, script_a: list[Any], script_b: list[Any], **negotiation: Any
) -> tuple[list[Any], list[Any], str, FakeModelServer, FakeModelServer]:
    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        fake_a.script(*script_a)
        fake_b.script(*script_b)
        async with two_edges(pg_url, second_pg_url) as edges:
            await _setup(edges, fake_a, fake_b, **negotiation)
            task = await _ask(edges.a, "Buy Sam's bike.")
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            return (
                await _rows(edges.a, "buyer"),
                await _rows(edges.b, "seller"),
                _tool_result(fake_a),
                fake_a,
                fake_b,
            )


async def test_conflict_on_terms(pg_url: str, second_pg_url: str) -> None:
    ours, theirs, digest, *_ = await _run(
        pg_url,
        second_pg_url,
        [
            _negotiate(),
            decision("propose", "$450, pick up Wednesday.", {"amount": 450, "day": "Wednesday"}),
            text("done"),
        ],
        [decision("accept", "Yes, Saturday.", {"amount": 450, "day": "Saturday"})],
    )
    for row in (*ours, *theirs):
        assert (row.verdict, row.basis) == ("conflict", "terms")
    assert "conflict: the two closing moves name different terms" in digest


async def test_prose_conflict(pg_url: str, second_pg_url: str) -> None:
    ours, theirs, digest, *_ = await _run(
        pg_url,
        second_pg_url,
        [_negotiate(), decision("accept", "Fine, $460 it is."), text("done")],
        [decision("accept", "Agreed at $450.")],
    )
    for row in (*ours, *theirs):
        assert (row.verdict, row.basis) == ("conflict", "prose")
    assert "You closed on 460 and they closed on 450" in digest


async def test_declined(pg_url: str, second_pg_url: str) -> None:
    ours, theirs, digest, *_ = await _run(
        pg_url,
        second_pg_url,
        [_negotiate(), decision("propose", "$300?", {"amount": 300}), text("done")],
        [decision("reject", "No.")],
    )
    for row in (*ours, *theirs):
        assert (row.verdict, row.basis, row.binding) == ("declined", "state", False)
        assert row.task_state == "TASK_STATE_REJECTED"
    assert "declined: task ended as rejected" in digest


async def test_out_of_turns_is_unanswered_and_a_rival_is_refused(
    pg_url: str, second_pg_url: str
) -> None:
    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        fake_a.script(
            _negotiate(),
            decision("propose", "$400?", {"amount": 400}),
            decision("counter", "$420?", {"amount": 420}),
            text("still open"),
            _negotiate(call_id="again"),
            text("refused"),
        )
        fake_b.script(
            decision("counter", "$480.", {"amount": 480}),
            decision("counter", "$470.", {"amount": 470}),
        )
        async with two_edges(pg_url, second_pg_url) as edges:
            await _setup(edges, fake_a, fake_b, max_turns=2)
            await _ask(edges.a, "Buy Sam's bike.")
            digest = _tool_result(fake_a)
            assert "Out of turns (1):" in digest and "2 turns, still open" in digest
            [ours] = await _rows(edges.a, "buyer")
            [theirs] = await _rows(edges.b, "seller")
            for row in (ours, theirs):
                assert (row.verdict, row.binding, row.turns) == ("unanswered", True, 2), row
            seen_b = len(fake_b.requests)
            seen_a = len(fake_a.requests)
            await _ask(edges.a, "Try again.", message_id="m2")
            refused = _tool_result(fake_a)
            assert "Refused (1):" in refused and f"negotiation {ours.id}" in refused
            assert len(fake_b.requests) == seen_b  # nothing sent
            assert len(fake_a.requests) == seen_a + 2  # the loop's two calls, no negotiator


def _answer_waiting(guidance: str) -> Any:
    """The loop's ``answer`` call naming the negotiation the digest said waits on the party."""

    def compute(body: dict[str, Any]) -> Any:
        shown = [
            str(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "tool"
        ]
        waiting = next(c for c in shown if "Waiting on you" in c)
        negotiation_id = re.search(r"- ([0-9a-f-]{36})", waiting)
        assert negotiation_id is not None
        return tool_call(
            "answer", {"ids": [negotiation_id.group(1)], "guidance": guidance}, call_id="ans"
        )

    return dynamic(compute)


async def test_parked_on_a_question_and_resumed(pg_url: str, second_pg_url: str) -> None:
    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        fake_a.script(
            _negotiate(),
            decision("ask", "What is the most I may pay?"),
            tool_call("ask_user", {"question": "What is the most I may pay?"}, call_id="q"),
            _answer_waiting("At most $460."),
            decision("propose", "$450 for the bike.", BIKE),
            text("Bought it for $450."),
        )
        fake_b.script(accepting("Deal.", with_terms=False))
        async with two_edges(pg_url, second_pg_url) as edges:
            await _setup(edges, fake_a, fake_b)
            task = await _ask(edges.a, "Buy Sam's bike.")
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
            waiting = _tool_result(fake_a)
            assert (
                "Waiting on you (1)" in waiting and 'asks: "What is the most I may pay?"' in waiting
            )
            [parked] = await _rows(edges.a, "buyer")
            assert parked.state == "parked" and parked.task_id is None
            assert fake_b.requests == []  # the ask never left the edge
            message = {
                "messageId": "m2",
                "role": "ROLE_USER",
                "taskId": task["id"],
                "parts": [{"text": "At most $460."}],
            }
            done = await edges.a.result("SendMessage", {"message": message}, tenant="buyer")
            assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
            [ours] = await _rows(edges.a, "buyer")
            [theirs] = await _rows(edges.b, "seller")
            assert ours.guidance == ("At most $460.",) and ours.pending is None
            for row in (ours, theirs):
                assert (row.verdict, row.basis, row.terms) == ("agreed", "reference", BIKE)
            # The guidance reached the negotiator's objective.
            assert "At most $460." in fake_a.requests[4].messages[0]["content"]


async def test_a_card_changed_in_transit_is_refused_and_nothing_is_sent(
    pg_url: str, second_pg_url: str
) -> None:
    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        fake_a.script(
            _negotiate(),
            decision("propose", "$400?", {"amount": 400}),
            text("could not reach them"),
        )
        async with two_edges(pg_url, second_pg_url) as edges:
            await _setup(edges, fake_a, fake_b)
            edges.router.tamper_cards = True
            await _ask(edges.a, "Buy Sam's bike.")
            digest = _tool_result(fake_a)
            assert "Failed (1):" in digest and "signature does not verify" in digest
            assert not any("SendMessage" in call for call in edges.router.calls)
            assert await _rows(edges.a, "buyer") == []  # a failed open leaves nothing
            assert fake_b.requests == []


async def test_a_counterparty_whose_key_changed_is_refused(pg_url: str, second_pg_url: str) -> None:
    with FakeModelServer() as fake_a, FakeModelServer() as fake_b:
        fake_a.script(_negotiate(), text("could not"))
        async with two_edges(pg_url, second_pg_url) as edges:
            await _setup(edges, fake_a, fake_b)
            pins = open_storage(edges.a.services.db).peer_pins
            await pins.pin(ORIGIN_B, ORIGIN_B + "/.well-known/jwks.json", "an-older-key")
            await _ask(edges.a, "Buy Sam's bike.")
            digest = _tool_result(fake_a)
            assert "Failed (1):" in digest and "differs from the one pinned" in digest
            assert not any("SendMessage" in call for call in edges.router.calls)
            assert len(fake_a.requests) == 2  # no negotiator was asked
