"""Two edges negotiate through the fake model server (issue 51, "Done when"): each side's
row records the same verdict; the loop learns the digest."""

from __future__ import annotations

from typing import Any

import pytest

from app.db.storage import open_storage
from app.testing.edge import EdgeHarness, demo_manifest
from app.testing.fake_model import FakeModelServer, text, tool_call
from tests.negotiation.kit import ORIGIN_B, accepting, decision, llm_config, two_edges

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
BIKE = {"amount": 450, "currency": "USD"}


def _negotiate(intent: str = "buy the bike") -> Any:
    return tool_call(
        "negotiate",
        {
            "counterparty": {"url": ORIGIN_B, "tenant": "seller"},
            "intent": intent,
            "opening": "Buy Sam's bike for at most $500.",
        },
    )


async def _ask(edge: EdgeHarness, text_: str, message_id: str = "m1") -> dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text_}]}
    result = await edge.result("SendMessage", {"message": message}, tenant="buyer")
    return dict(result.get("task", result))


async def _setup(edges: Any, fake_a: FakeModelServer, fake_b: FakeModelServer) -> None:
    await edges.a.add_tenant(
        "buyer",
        manifest=demo_manifest("Buyer"),
        agent="llm",
        agent_config=llm_config(fake_a.base_url),
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
        for message in request.messages:
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
