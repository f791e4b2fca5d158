"""A gateway turn to an ``llm`` tenant backed by the fake model, through the real edge and
worker on both backends: it runs a tool, asks (INPUT_REQUIRED with the HITL request part), is
answered through the gateway's HITL continuation, and completes; every push verifies as the
gateway verifies it, and step pushes carry ``<taskId>:step-<n>``."""

from __future__ import annotations

import asyncio
from typing import Any

from app.agents.llm import hitl
from app.agents.llm.plugins import build_plugins
from app.agents.llm.runtime import LlmRuntime
from app.agents.registry import default_registry
from app.db.engine import Database
from app.db.storage import open_storage
from app.testing.edge import edge_harness
from app.testing.fake_model import FakeModelServer, text, tool_call
from app.testing.gateway import GatewayKit
from app.testing.push_receiver import CallbackExpectation, push_receiver

FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01, "push_retry_base_seconds": 0.01}
TURN = '<turn from="Grace" id="U2" channel="general" at="2026-06-14T10:00:00.000Z">paint</turn>'


async def lookup(colour: str) -> str:
    """Look a colour up."""
    return f"{colour} is in stock"


class Stock:
    key = "stock"
    tools = (lookup,)


def _registry(db: Database) -> Any:
    runtime = LlmRuntime(
        environ={},
        failure_text="failed",
        plugins=build_plugins([Stock()], {}, builtins=[hitl.ASK_USER_TOOL]),
        sessions=open_storage(db).sessions,
    )
    return default_registry(runtime)


def _message(message_id: str, *parts: dict[str, Any], task_id: str | None = None) -> dict:
    doc: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": list(parts)}
    if task_id is not None:
        doc["taskId"] = task_id
    return doc


async def test_tools_ask_answer_complete(db_url: str) -> None:
    kit = GatewayKit()
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(
            tool_call("lookup", {"colour": "blue"}, call_id="c1"),
            tool_call("ask_user", {"question": "Blue?", "options": ["yes", "no"]}, call_id="c2"),
            text("Painted it blue."),
        )
        config = {
            "model": {"base_url": fake.base_url, "name": "fake"},
            "system_prompt": "You paint.",
            "tools": ["lookup"],
        }
        async with push_receiver() as rx:
            origins = [kit.origin, rx.base_url]
            async with edge_harness(
                db_url,
                gateway=kit,
                background=True,
                agents=_registry(db),
                gateway_origins=origins,
                **FAST,
            ) as edge:
                rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
                await edge.add_tenant("demo", agent="llm", agent_config=config)
                url, token = rx.endpoint("task-cfg")
                params = {
                    "message": _message("m-1", {"text": TURN}),
                    "configuration": {"taskPushNotificationConfig": {"url": url, "token": token}},
                }
                task_id = (await edge.result("SendMessage", params))["task"]["id"]
                asked = await rx.wait_for(lambda p: p.state == "TASK_STATE_INPUT_REQUIRED")
                parts = asked.task["status"]["message"]["parts"]
                assert parts[0]["text"] == "Blue?"
                request = parts[1]["data"]
                assert (
                    request["type"] == hitl.REQUEST_TYPE and request["options"][0]["label"] == "yes"
                )
                # The gateway's HITL continuation: the label as text plus the response part.
                response = {
                    "type": hitl.RESPONSE_TYPE,
                    "requestId": request["requestId"],
                    "optionId": "opt-1",
                    "answeredBy": "U2",
                }
                answer = _message(
                    f"{token}:r:{request['requestId']}",
                    {"text": "yes"},
                    {"data": response, "mediaType": "application/json"},
                    task_id=task_id,
                )
                await edge.result("SendMessage", {**params, "message": answer})
                final = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final")
                assert final.state == "TASK_STATE_COMPLETED"
                assert final.task["status"]["message"]["parts"][0]["text"] == "Painted it blue."
                delivered = [p.message_id for p in rx.deliveries]
                assert all(p.error is None and p.claims is not None for p in rx.requests)
    await db.dispose()
    steps = [m for m in delivered if m and ":step-" in m]
    assert steps == [f"{task_id}:step-{n}" for n in (1, 2, 3)]
    # The model saw the sender and channel, the tool's result and the chosen option's label.
    assert fake.requests[0].messages[-1]["content"].startswith("[from Grace in #general")
    assert fake.requests[1].messages[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "blue is in stock",
    }
    assert fake.requests[2].messages[-1] == {"role": "tool", "tool_call_id": "c2", "content": "yes"}


def _llm_edge(db_url: str, kit: GatewayKit, rx_url: str, db: Database) -> Any:
    return edge_harness(
        db_url,
        gateway=kit,
        background=True,
        agents=_registry(db),
        gateway_origins=[kit.origin, rx_url],
        **FAST,
    )


async def test_answers_that_are_not_pending_are_refused(db_url: str) -> None:
    kit = GatewayKit()
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(tool_call("ask_user", {"question": "Go?"}, call_id="q"), text("went"))
        config = {"model": {"base_url": fake.base_url, "name": "fake"}, "system_prompt": "x"}
        async with push_receiver() as rx, _llm_edge(db_url, kit, rx.base_url, db) as edge:
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant("demo", agent="llm", agent_config=config)
            url, token = rx.endpoint("cfg")
            push = {"taskPushNotificationConfig": {"url": url, "token": token}}
            params = {"message": _message("m-1", {"text": "start"}), "configuration": push}
            task_id = (await edge.result("SendMessage", params))["task"]["id"]
            asked = await rx.wait_for(lambda p: p.state == "TASK_STATE_INPUT_REQUIRED")
            rid = asked.task["status"]["message"]["parts"][1]["data"]["requestId"]

            def answer(message_id: str, request_id: str) -> dict[str, Any]:
                data = {"type": hitl.RESPONSE_TYPE, "requestId": request_id, "text": "yes"}
                msg = _message(message_id, {"text": "yes"}, {"data": data}, task_id=task_id)
                return {"message": msg, "configuration": push}

            wrong = (await edge.rpc("SendMessage", answer("a-0", "not-the-one"))).json()
            assert wrong["error"]["code"] == -32004
            # Two answers at once: one resumes the task, the other is refused.
            both = await asyncio.gather(
                *(edge.rpc("SendMessage", answer(mid, rid)) for mid in ("a-1", "a-2"))
            )
            docs = sorted((r.json() for r in both), key=lambda d: "error" in d)
            assert "result" in docs[0] and docs[1]["error"]["code"] == -32004
            final = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final")
            assert final.state == "TASK_STATE_COMPLETED"
            # An answer to a task that is not waiting any more.
            late = (await edge.rpc("SendMessage", answer("a-3", rid))).json()
            assert late["error"]["code"] == -32004
    await db.dispose()
    assert [m["content"] for m in fake.requests[1].messages if m["role"] == "tool"] == ["yes"]


async def test_a_plain_message_for_a_working_task_steers_it(db_url: str) -> None:
    kit = GatewayKit()
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(
            tool_call("lookup", {"colour": "red"}, call_id="c1", delay=1.5),
            text("Switched to green."),
        )
        config = {
            "model": {"base_url": fake.base_url, "name": "fake"},
            "system_prompt": "x",
            "tools": ["lookup"],
        }
        async with push_receiver() as rx, _llm_edge(db_url, kit, rx.base_url, db) as edge:
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant("demo", agent="llm", agent_config=config)
            url, token = rx.endpoint("cfg")
            push = {"taskPushNotificationConfig": {"url": url, "token": token}}
            params = {"message": _message("m-1", {"text": "paint red"}), "configuration": push}
            task_id = (await edge.result("SendMessage", params))["task"]["id"]
            for _ in range(100):
                if fake.requests:
                    break
                await asyncio.sleep(0.05)
            steer = _message("m-2", {"text": "actually green"}, task_id=task_id)
            await edge.result("SendMessage", {"message": steer, "configuration": push})
            final = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)
            assert final.state == "TASK_STATE_COMPLETED"
    await db.dispose()
    second = fake.requests[1].messages
    assert second[-1] == {"role": "user", "content": "actually green"}
    assert second[-2]["role"] == "tool"  # the tool's result first, then the steering message
    assert len(fake.requests) == 2
