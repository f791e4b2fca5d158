"""Issue 54, "Done when", across real processes on PostgreSQL: an ``llm`` agent on edge A asks
another agent with ``a2a_send(wait=true)`` through the fake model server and its reply uses
the answer; every push to A's gateway verifies. The peer is edge B's agent (an edge token; B
records who sent it and its model is told), or an a2a-sdk server that requires a bearer token
(``bearer_env``), which also answers 5 MB: the model gets 32 KiB of it, ``truncated``. And
the other tools against B: a send without waiting, a read that waits, a cancel refused
because the task finished."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from app.testing.fake_model import Step, dynamic, text, tool_call
from app.testing.sdk_peer import SdkPeer
from tests.peers.processes import (
    ASKER_NAME,
    peer_world,
    relay,
    tool_doc,
    tool_results,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
KNOBS = {"peer_poll_seconds": 0.2}
QUESTION = "What is the fare to Lyon?"
TEXT_BOUND = 32 * 1024


def _send(agent: str, call_id: str = "s1") -> Step:
    return tool_call("a2a_send", {"agent": agent, "text": QUESTION, "wait": True}, call_id=call_id)


async def test_an_agent_on_a_asks_bs_agent_and_uses_its_answer(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    async with peer_world(pg_url, second_pg_url, tmp_path, **KNOBS) as world:
        world.fake_b.script(text("The fare is 120 EUR."))
        world.fake_a.script(_send("helper"), relay("B says: "))
        task_id = await world.ask("Find the fare to Lyon.")
        final = await world.final(task_id)
        assert final.state == "TASK_STATE_COMPLETED", final.task
        assert final.text == "B says: The fare is 120 EUR."
        [result] = tool_results(world.fake_a)
        doc = tool_doc(result)
        assert (doc["ok"], doc["agent"], doc["state"]) == (True, "helper", "TASK_STATE_COMPLETED")
        assert doc["text"] == "The fare is 120 EUR." and doc["truncated"] is False
        # B ran it once, knows who sent it, and told its model.
        [(task, received)] = await world.helper_tasks()
        assert [m["parts"][0]["text"] for m in received] == [QUESTION]
        assert task.id == doc["taskId"] and task.state == "TASK_STATE_COMPLETED"
        assert task.metadata_ == {"looping.peer": {"name": ASKER_NAME, "origin": world.a.url}}
        shown = world.fake_b.requests[0].messages[-1]["content"]
        heading = f'[A2A message from the peer agent "{ASKER_NAME}" at {world.a.url}'
        assert shown.startswith(heading) and shown.endswith(QUESTION)


async def test_an_agent_asks_an_sdk_agent_that_requires_a_bearer_token(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    with SdkPeer(secrets.token_urlsafe(24), answer=lambda t: f"Bonjour ({t})") as sdk:
        async with peer_world(pg_url, second_pg_url, tmp_path, sdk=sdk, **KNOBS) as world:
            world.fake_a.script(_send("sdk"), relay("The SDK agent says: "))
            task_id = await world.ask("Say hello in French.")
            final = await world.final(task_id)
            assert final.state == "TASK_STATE_COMPLETED", final.task
            assert final.text == f"The SDK agent says: Bonjour ({QUESTION})"
            assert [r.text for r in sdk.received] == [QUESTION]
            assert sdk.refused == 0  # every request carried the token from A's environment
            for request in world.fake_a.requests:  # never shown to the model
                assert sdk.token not in str(request.body)


async def test_a_5_mb_answer_reaches_the_model_as_32_kib_truncated(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    huge = "ab" * (5 * 1024 * 1024 // 2)
    with SdkPeer(secrets.token_urlsafe(24), answer=lambda _t: huge) as sdk:
        async with peer_world(
            pg_url,
            second_pg_url,
            tmp_path,
            sdk=sdk,
            asker={"max_tool_output_bytes": 65536},
            **KNOBS,
        ) as world:
            world.fake_a.script(_send("sdk"), text("It answered at length."))
            task_id = await world.ask("Ask for everything.")
            final = await world.final(task_id)
            assert final.state == "TASK_STATE_COMPLETED", final.task
            [result] = tool_results(world.fake_a)
            doc = tool_doc(result)
            assert doc["ok"] is True and doc["truncated"] is True
            assert doc["state"] == "TASK_STATE_COMPLETED"
            shown = doc["text"].encode()
            assert 0 < len(shown) <= TEXT_BOUND and huge.encode().startswith(shown)
            assert len(result.encode()) < 2 * TEXT_BOUND
            assert len(sdk.received) == 1


def _on_last_task(tool: str, **arguments: object) -> Step:
    """A call of ``tool`` on the peer task named by the last tool result."""

    def compute(body: dict[str, object]) -> Step:
        messages = body.get("messages")
        assert isinstance(messages, list)
        results = [m for m in messages if m.get("role") == "tool"]
        task_id = tool_doc(str(results[-1]["content"]))["taskId"]
        call = {"agent": "helper", "task_id": task_id, **arguments}
        return tool_call(tool, call, call_id=f"{tool}-1")

    return dynamic(compute)


async def test_send_read_and_cancel_across_two_edges(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    async with peer_world(pg_url, second_pg_url, tmp_path, **KNOBS) as world:
        world.fake_b.script(text("The fare is 120 EUR.", delay=2))
        send = {"agent": "helper", "text": QUESTION, "wait": False}
        world.fake_a.script(
            tool_call("a2a_send", send, call_id="s1"),
            _on_last_task("a2a_get_task", wait=True),
            _on_last_task("a2a_cancel_task"),
            text("done"),
        )
        final = await world.final(await world.ask("Find the fare, then cancel."))
        assert final.state == "TASK_STATE_COMPLETED", final.task
        sent, read, cancel = (tool_doc(r) for r in tool_results(world.fake_a))
        assert sent["ok"] is True
        assert sent["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        assert (read["state"], read["text"]) == ("TASK_STATE_COMPLETED", "The fare is 120 EUR.")
        assert read["taskId"] == cancel["taskId"] == sent["taskId"]
        assert cancel["ok"] is False and cancel["code"] == "TASK_NOT_CANCELABLE"
        assert cancel["state"] == "TASK_STATE_COMPLETED"
        [(task, received)] = await world.helper_tasks()
        assert task.id == sent["taskId"] and len(received) == 1
