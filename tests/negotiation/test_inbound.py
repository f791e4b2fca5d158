"""A peer's negotiation turn on one edge, both backends: who may send one, the negotiator's
saved reply (a retry asks no model), the rival rule at accept, the negotiate card skill."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.db.storage import open_storage
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.fake_model import FakeModelServer, text, tool_call
from app.testing.gateway import GatewayKit
from tests.negotiation.kit import FAST, decision, llm_config

PEER = "https://peer.test"


@pytest.fixture
def peer() -> GatewayKit:
    return GatewayKit(origin=PEER, kid="peer-key")


@pytest.fixture
def fake() -> Any:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
async def edge(db_url: str, peer: GatewayKit, fake: FakeModelServer) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url, peers=[peer], background=True, **FAST) as harness:
        config = llm_config(fake.base_url, actions=[{"action": "decline", "terminal": True}])
        await harness.add_tenant(
            "shop", agent="llm", agent_config=config, profile="open", require_push_config=False
        )
        await harness.add_tenant("plain", profile="open", require_push_config=False)
        yield harness


def _turn(message_id: str, intent: str = "sell bike", **decision_: Any) -> dict[str, Any]:
    data = {"action": "propose", "message": "$400?", "terms": {"amount": 400}, **decision_}
    return {
        "message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": [{"data": data, "mediaType": "application/json"}],
            "metadata": {"io.looping.negotiation": {"intent": intent}},
        }
    }


def _token(edge: EdgeHarness, peer: GatewayKit, tenant: str = "shop") -> str:
    return peer.mint(audience=edge.endpoint, tenant=tenant, identity={"key": "buyer"})


async def test_a_decision_from_a_gateway_token_is_invalid_params(edge: EdgeHarness) -> None:
    r = await edge.rpc("SendMessage", _turn("g1"), tenant="shop")
    error = r.json()["error"]
    assert error["code"] == -32602 and "peer" in error["message"]
    assert await open_storage(edge.services.db).negotiations.list_for("shop") == []


async def test_a_tenant_that_does_not_negotiate_refuses(
    edge: EdgeHarness, peer: GatewayKit
) -> None:
    r = await edge.rpc(
        "SendMessage", _turn("p0"), tenant="plain", token=_token(edge, peer, "plain")
    )
    assert r.json()["error"]["code"] == -32004


async def test_a_peers_turn_is_answered_once_and_a_rival_is_refused(
    edge: EdgeHarness, peer: GatewayKit, fake: FakeModelServer
) -> None:
    fake.script(decision("counter", "$450.", {"amount": 450}, offerId="model-made"))
    first = await edge.result("SendMessage", _turn("p1"), tenant="shop", token=_token(edge, peer))
    task = first["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    [part] = task["status"]["message"]["parts"]
    reply = part["data"]
    assert reply["action"] == "counter" and reply["terms"] == {"amount": 450}
    assert reply["offerId"] != "model-made" and len(reply["offerId"]) == 36
    # The same message again: the same task, no model call.
    again = await edge.result("SendMessage", _turn("p1"), tenant="shop", token=_token(edge, peer))
    assert again["task"]["id"] == task["id"] and len(fake.requests) == 1
    [row] = await open_storage(edge.services.db).negotiations.list_for("shop")
    assert (row.direction, row.task_id, row.intent) == ("inbound", task["id"], "sell bike")
    assert row.counterparty == f"{PEER}/buyer" and row.identity == f"peer:{PEER}:buyer"
    # A second negotiation on the same intent is refused before any task exists.
    r = await edge.rpc("SendMessage", _turn("p2"), tenant="shop", token=_token(edge, peer))
    error = r.json()["error"]
    assert error["code"] == -32004 and row.id in error["message"]
    assert len(await open_storage(edge.services.db).negotiations.list_for("shop")) == 1
    # Another intent is no rival; a terminal configured action ends the task REJECTED.
    fake.script(decision("decline", "Not for sale."))
    other = await edge.result(
        "SendMessage", _turn("p3", intent="sell desk"), tenant="shop", token=_token(edge, peer)
    )
    assert other["task"]["status"]["state"] == "TASK_STATE_REJECTED"
    rows = await open_storage(edge.services.db).negotiations.list_for("shop")
    declined = next(r for r in rows if r.intent == "sell desk")
    assert (declined.verdict, declined.binding, declined.state) == ("declined", False, "ended")
    # A negotiation that ended is never continued.
    cont = _turn("p4", intent="sell desk")
    cont["message"]["taskId"] = other["task"]["id"]
    r = await edge.rpc("SendMessage", cont, tenant="shop", token=_token(edge, peer))
    assert r.json()["error"]["code"] == -32004


async def test_the_card_names_every_action(edge: EdgeHarness, peer: GatewayKit) -> None:
    card = await edge.result("GetExtendedAgentCard", {}, tenant="shop")
    [skill] = [s for s in card["skills"] if s["id"] == "negotiate"]
    for action in ("propose", "counter", "accept", "reject", "decline"):
        assert action in skill["description"]
    plain = await edge.result("GetExtendedAgentCard", {}, tenant="plain")
    assert all(s["id"] != "negotiate" for s in plain["skills"])
    assert json.dumps(card)  # the signed card stays JSON


async def test_an_inbound_ask_goes_to_the_peer_and_guidance_joins_the_next_reply(
    edge: EdgeHarness, peer: GatewayKit, fake: FakeModelServer
) -> None:
    fake.script(decision("ask", "What pick-up day suits you?"))
    first = await edge.result("SendMessage", _turn("p1"), tenant="shop", token=_token(edge, peer))
    task = first["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["status"]["message"]["parts"][0]["data"]["action"] == "ask"
    store = open_storage(edge.services.db).negotiations
    [row] = await store.list_for("shop")
    assert row.pending == "What pick-up day suits you?"
    # The party answers through its own agent's loop: the guidance is recorded, nothing sent.
    fake.script(
        tool_call("answer", {"ids": [row.id], "guidance": "Never below $420."}, call_id="a1"),
        text("Noted."),
    )
    done = await edge.result(
        "SendMessage",
        {"message": {"messageId": "g1", "role": "ROLE_USER", "parts": [{"text": "420 min"}]}},
        tenant="shop",
    )
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    recorded = [m for m in fake.requests[-1].messages if m.get("role") == "tool"][-1]
    assert "Recorded (1):" in recorded["content"]
    # The loop was told, in its system prompt, which negotiation waits on the party.
    system = fake.requests[-2].messages[0]["content"]
    assert f"{row.id} ({PEER}/buyer) — they contacted you; waiting on your guidance" in system
    assert f"Waiting on your party right now: {row.id}." in system
    [row] = await store.list_for("shop")
    assert row.guidance == ("Never below $420.",) and row.pending is None
    # Their next move is answered with the guidance in the negotiator's objective.
    fake.script(decision("counter", "$420, Saturday.", {"amount": 420}))
    nxt = _turn("p2")
    nxt["message"]["taskId"] = task["id"]
    nxt["message"].pop("metadata")
    again = await edge.result("SendMessage", nxt, tenant="shop", token=_token(edge, peer))
    assert again["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "Never below $420." in fake.requests[-1].messages[0]["content"]


async def test_only_peer_origins_may_be_dialled(edge: EdgeHarness, fake: FakeModelServer) -> None:
    fake.script(
        tool_call(
            "negotiate",
            {
                "counterparty": {"url": "https://elsewhere.test", "tenant": "x"},
                "intent": "buy",
                "opening": "go",
            },
            call_id="n1",
        ),
        text("could not"),
    )
    done = await edge.result(
        "SendMessage",
        {"message": {"messageId": "g1", "role": "ROLE_USER", "parts": [{"text": "buy"}]}},
        tenant="shop",
    )
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    result = [m for m in fake.requests[-1].messages if m.get("role") == "tool"][-1]
    assert "is not a counterparty this edge may dial" in result["content"]
    assert await open_storage(edge.services.db).negotiations.list_for("shop") == []
    assert len(fake.requests) == 2  # no negotiator was asked


async def test_on_settled_reaches_the_plugins(edge: EdgeHarness) -> None:
    from app.agents.llm.plugins import build_plugins
    from app.negotiation.decision import Decision
    from app.negotiation.settlement import Settlement

    seen: list[Any] = []

    class Hooked:
        key = "hooked"

        def on_settled(self, negotiation: Any, settlement: Any) -> None:
            seen.append((negotiation, settlement.outcome))

    class Broken:
        key = "broken"

        async def on_settled(self, negotiation: Any, settlement: Any) -> None:
            raise RuntimeError("boom")

    service = edge.services.negotiation
    service.plugins = build_plugins([Broken(), Hooked()], {})  # type: ignore[union-attr]
    mine = Decision("accept", "ok")
    await service.on_settled("n", Settlement("agreed", "terms", "r", mine, None))  # type: ignore[union-attr]
    assert seen == [("n", "agreed")]


async def test_a_claim_left_without_its_task_is_dropped_once_old(
    edge: EdgeHarness, peer: GatewayKit, fake: FakeModelServer
) -> None:
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import update

    from app.db.models import NegotiationRow
    from app.db.negotiations import INBOUND, NewNegotiation

    store = open_storage(edge.services.db).negotiations
    lost = await store.claim(
        NewNegotiation(
            id="lost",
            tenant="shop",
            identity=f"peer:{PEER}:buyer",
            direction=INBOUND,
            counterparty=f"{PEER}/buyer",
            intent="sell bike",
            origin_key="in:lost",
        )
    )
    assert lost.created
    r = await edge.rpc("SendMessage", _turn("p1"), tenant="shop", token=_token(edge, peer))
    assert r.json()["error"]["code"] == -32004  # a fresh claim still holds the key
    async with edge.services.db.transaction() as s:
        await s.execute(
            update(NegotiationRow)
            .where(NegotiationRow.id == "lost")
            .values(updated_at=datetime.now(UTC) - timedelta(minutes=5))
        )
    fake.script(decision("counter", "$450.", {"amount": 450}))
    ok = await edge.result("SendMessage", _turn("p2"), tenant="shop", token=_token(edge, peer))
    assert ok["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert [r.id for r in await store.list_for("shop")] != ["lost"]
    assert await store.get("shop", "lost") is None


async def test_a_python_negotiator_decides_instead_of_a_model(
    edge: EdgeHarness, peer: GatewayKit, fake: FakeModelServer
) -> None:
    config = llm_config(fake.base_url, negotiator="tests.negotiation.negotiators:accept_last_offer")
    await edge.add_tenant(
        "py", agent="llm", agent_config=config, profile="open", require_push_config=False
    )
    turn = _turn("py1", offerId="their-offer")
    done = await edge.result("SendMessage", turn, tenant="py", token=_token(edge, peer, "py"))
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    reply = done["task"]["status"]["message"]["parts"][0]["data"]
    assert (
        reply["acceptsOfferId"] == "their-offer" and reply["offerId"] != "written-by-the-negotiator"
    )
    assert fake.requests == []
    [row] = await open_storage(edge.services.db).negotiations.list_for("py")
    assert (row.verdict, row.basis, row.terms) == ("agreed", "reference", {"amount": 400})


async def test_a_negotiation_whose_task_the_peer_canceled_frees_the_intent(
    edge: EdgeHarness, peer: GatewayKit, fake: FakeModelServer
) -> None:
    fake.script(decision("counter", "$450.", {"amount": 450}))
    first = await edge.result("SendMessage", _turn("p1"), tenant="shop", token=_token(edge, peer))
    task_id = first["task"]["id"]
    await edge.result("CancelTask", {"id": task_id}, tenant="shop", token=_token(edge, peer))
    fake.script(decision("counter", "$440.", {"amount": 440}))
    again = await edge.result("SendMessage", _turn("p2"), tenant="shop", token=_token(edge, peer))
    assert again["task"]["id"] != task_id
    rows = {
        r.task_id: r for r in await open_storage(edge.services.db).negotiations.list_for("shop")
    }
    old = rows[task_id]
    assert (old.state, old.verdict, old.basis, old.binding) == ("ended", "declined", "state", False)
    assert old.reason == "task ended as canceled"
