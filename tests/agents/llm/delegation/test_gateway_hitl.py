"""A delegating ``llm`` tenant asks its human and takes steering, through the real edge and
worker on both backends: round 2's ``ask_user`` puts the task in INPUT_REQUIRED with the HITL
request part, the gateway's answer resumes the rounds at round 3 with the answer as the call's
result; a message sent while a round's subagents run reaches the next round once; one sent
after the final reply makes the turn run again from the round that replied."""

from __future__ import annotations

import asyncio
from typing import Any

from app.agents.llm import hitl
from app.agents.llm.events import LoopEvent, TurnEnded
from app.db.engine import Database
from app.testing.edge import EdgeHarness
from app.testing.fake_model import FakeModelServer, text
from app.testing.gateway import GatewayKit
from app.testing.push_receiver import CallbackExpectation, push_receiver
from tests.agents.llm.delegation.kit import ask, config, delegate, final, gateway_edge
from tests.polling import poll_until


def _message(message_id: str, *parts: dict[str, Any], task_id: str | None = None) -> dict:
    doc: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": list(parts)}
    if task_id is not None:
        doc["taskId"] = task_id
    return doc


async def _entries(edge: EdgeHarness, task_id: str) -> list[str]:
    sessions = edge.services.db.storage.sessions
    entries = await sessions.transcript("demo", edge.identity["key"]).entries()
    return [e.id.removeprefix(f"task:{task_id}:") for e in entries]


def _said(request: Any) -> list[tuple[str, str | None]]:
    return [(m["role"], m.get("content")) for m in request.messages[1:]]


async def test_ask_then_answer_then_the_final_reply(db_url: str) -> None:
    kit = GatewayKit()
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(
            delegate("a"),
            text("found a"),
            ask("Blue or green?", ["blue", "green"]),
            final("Painted it green."),
        )
        async with push_receiver() as rx, gateway_edge(db_url, kit, rx.base_url, db) as edge:
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant("demo", agent="llm", agent_config=config(fake))
            url, token = rx.endpoint("cfg")
            push = {"taskPushNotificationConfig": {"url": url, "token": token}}
            params = {"message": _message("m-1", {"text": "paint"}), "configuration": push}
            task_id = (await edge.result("SendMessage", params))["task"]["id"]
            asked = await rx.wait_for(lambda p: p.state == "TASK_STATE_INPUT_REQUIRED", within=20)
            parts = asked.task["status"]["message"]["parts"]
            request = parts[1]["data"]
            waiting = await _entries(edge, task_id)
            # The gateway's HITL continuation: the label as text plus the response part.
            response = {
                "type": hitl.RESPONSE_TYPE,
                "requestId": request["requestId"],
                "optionId": "opt-2",
            }
            answer = _message(
                f"{token}:r:{request['requestId']}",
                {"text": "green"},
                {"data": response, "mediaType": "application/json"},
                task_id=task_id,
            )
            await edge.result("SendMessage", {"message": answer, "configuration": push})
            done = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)
            entries = await _entries(edge, task_id)
            await asyncio.sleep(0.3)  # anything pushed twice would arrive by now
            delivered = [p.message_id for p in rx.deliveries]
            assert all(p.error is None and p.claims is not None for p in rx.requests)
    await db.dispose()
    assert parts[0]["text"] == "Blue or green?"
    assert request["type"] == hitl.REQUEST_TYPE
    assert request["requestId"] == f"ask-2-{task_id}"
    assert [o["label"] for o in request["options"]] == ["blue", "green"]
    assert waiting[-1] == "round:2:ask"
    assert done.state == "TASK_STATE_COMPLETED"
    assert done.task["status"]["message"]["parts"][0]["text"] == "Painted it green."
    assert delivered.count(f"{task_id}:final") == 1
    assert delivered.count(f"{task_id}:round-1:ack") == 1
    # Round 3 saw the chosen option's label as the question's result; nothing ran twice.
    assert len(fake.requests) == 4
    assert fake.requests[3].messages[-1] == {
        "role": "tool",
        "tool_call_id": "q1",
        "content": "green",
    }
    assert sorted(fake.requests[2].tool_names) == ["ask_user", "delegate", "final_reply"]
    assert "ask_user" not in fake.requests[1].tool_names  # a subagent never asks
    assert [e for e in entries if not e.startswith("user:")] == [
        "round:1:ack",
        "round:1:results",
        "round:2:ask",
        "round:2:results",
        "reply:final",
    ]


async def test_a_steer_while_subagents_run_reaches_the_next_round_once(db_url: str) -> None:
    kit = GatewayKit()
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(
            delegate("a"),
            text("found a", delay=1.5),
            delegate("b", reply="And b"),
            text("found b"),
            final("Both, green."),
        )
        async with push_receiver() as rx, gateway_edge(db_url, kit, rx.base_url, db) as edge:
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant("demo", agent="llm", agent_config=config(fake))
            url, token = rx.endpoint("cfg")
            push = {"taskPushNotificationConfig": {"url": url, "token": token}}
            params = {"message": _message("m-1", {"text": "paint"}), "configuration": push}
            task_id = (await edge.result("SendMessage", params))["task"]["id"]
            await poll_until(lambda: len(fake.requests) >= 2 or None, timeout=10)
            steer = _message("m-2", {"text": "make it green"}, task_id=task_id)
            await edge.result("SendMessage", {"message": steer, "configuration": push})
            done = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)
            entries = await _entries(edge, task_id)
    await db.dispose()
    assert done.task["status"]["message"]["parts"][0]["text"] == "Both, green."
    assert len(fake.requests) == 5
    round2, round3 = fake.requests[2], fake.requests[4]
    assert _said(fake.requests[0]) == [("user", "paint")]
    # Round 2: the round's results, then the steer; round 3 holds it once, in the same place.
    assert _said(round2)[-1] == ("user", "make it green")
    assert _said(round3).count(("user", "make it green")) == 1
    assert _said(round3)[: len(_said(round2))] == _said(round2)
    assert entries.count("user:m-2") == 1
    assert (
        entries.index("round:1:results") < entries.index("user:m-2") < entries.index("round:2:ack")
    )


class SteerAtTheEnd:
    """One steering message for the task when its first run ends: after the rounds' last look
    at the history and before the worker writes the outcome."""

    def __init__(self) -> None:
        self.edge: EdgeHarness | None = None
        self.sent: dict[str, Any] | None = None

    async def __call__(self, event: LoopEvent) -> None:
        if isinstance(event, TurnEnded) and event.outcome == "completed" and self.sent is None:
            assert self.edge is not None
            message = _message("m-late", {"text": "and make it green"}, task_id=event.task_id)
            params = {"message": message, "configuration": {"returnImmediately": True}}
            self.sent = await self.edge.result("SendMessage", params)


async def test_a_steer_after_the_final_reply_is_answered(db_url: str) -> None:
    kit = GatewayKit()
    db = Database(db_url)
    steer = SteerAtTheEnd()
    with FakeModelServer() as fake:
        fake.script(final("Painted it red."), final("Painted it green."))
        async with (
            push_receiver() as rx,
            gateway_edge(db_url, kit, rx.base_url, db, subscribers=[steer]) as edge,
        ):
            steer.edge = edge
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant(
                "demo", agent="llm", agent_config=config(fake), require_push_config=False
            )
            url, token = rx.endpoint("cfg")
            push = {"taskPushNotificationConfig": {"url": url, "token": token}}
            params = {"message": _message("m-1", {"text": "paint"}), "configuration": push}
            task_id = (await edge.result("SendMessage", params))["task"]["id"]
            done = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)
            entries = await _entries(edge, task_id)
    await db.dispose()
    assert steer.sent is not None and steer.sent["task"]["id"] == task_id  # accepted
    assert done.task["status"]["message"]["parts"][0]["text"] == "Painted it green."
    assert len(fake.requests) == 2
    assert _said(fake.requests[1])[-2:] == [
        ("assistant", "Painted it red."),
        ("user", "and make it green"),
    ]
    assert entries == ["user:m-1", "reply:final", "user:m-late", "reply:2"]
