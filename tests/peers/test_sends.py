"""``a2a_send`` made durable (issue 54): the intent before the request, the acknowledgement
after, and whatever happens between (a crash, a timeout, a duplicate run, the tool's own
deadline) nothing is sent twice and the model is told what is known. Both backends."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from app.db.engine import Database
from app.db.peer_sends import NewPeerSend
from app.db.storage import open_storage
from app.peers.tools import PeerTools
from tests.peers.kit import (
    ORIGIN,
    FakePeer,
    call,
    config,
    ctx,
    hang,
    task,
    tool,
    tools_for,
    working_then_done,
)


async def _sent_twice(tools: PeerTools) -> tuple[Any, Any]:
    """One a2a_send call, then the same call run again (as after a crash)."""
    first = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x")
    return first, await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x")


async def test_a_peer_that_is_down_is_unreachable_and_nothing_is_recorded(
    database: Database,
) -> None:
    peer = FakePeer(down=True)
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["error"] == "UNREACHABLE"
    assert await open_storage(database).peer_sends.find("acme", "t-1:call-1") is None


async def test_a_slow_send_is_uncertain_and_never_sent_again(database: Database) -> None:
    peer = FakePeer()

    async def slow(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {"task": task("p-1", "TASK_STATE_SUBMITTED")}

    peer.methods["SendMessage"] = slow
    tools = tools_for(database, peer)
    got, again = await _sent_twice(tools)
    assert got["error"] == "DELIVERY_UNCERTAIN" and got["cause"] == "TIMEOUT"
    assert again["error"] == "DELIVERY_UNCERTAIN" and again["resumed"] is True
    assert len(peer.sent) == 1
    counted = tools.metrics.registry.get_sample_value(
        "edge_peer_calls_total", {"tool": "a2a_send", "outcome": "DELIVERY_UNCERTAIN"}
    )
    assert counted == 2


async def test_a_send_answered_with_a_redirect_is_refused_for_good(database: Database) -> None:
    peer = FakePeer()
    peer.methods["SendMessage"] = lambda p: httpx.Response(307, headers={"location": ORIGIN})
    tools = tools_for(database, peer)
    got, again = await _sent_twice(tools)
    assert got["error"] == "REDIRECT_REFUSED"
    assert again["error"] == "REDIRECT_REFUSED" and again["resumed"] is True
    assert len(peer.sent) == 1


async def test_a_message_instead_of_a_task_is_the_answer(database: Database) -> None:
    peer = FakePeer()
    reply = {"messageId": "r-1", "role": "ROLE_AGENT", "parts": [{"text": "right away"}]}
    peer.methods["SendMessage"] = lambda p: {"message": reply}
    tools = tools_for(database, peer)
    got = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x")
    assert got["ok"] and got["state"] == "MESSAGE" and got["taskId"] is None
    assert got["text"] == "right away"
    again = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x")
    assert again["text"] == "right away" and again["resumed"] is True
    assert len(peer.sent) == 1 and "GetTask" not in peer.calls


async def test_an_intent_without_ack_is_uncertain_and_never_sent(database: Database) -> None:
    """A run that crashed after recording its intent: the re-run does not send."""
    peer = FakePeer()
    working_then_done(peer)
    store = open_storage(database).peer_sends
    await store.record_intent(
        NewPeerSend("acme", "t-1:call-1", "alice", "t-1", "helper", ORIGIN, "m-first")
    )
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["error"] == "DELIVERY_UNCERTAIN" and got["messageId"] == "m-first"
    assert peer.sent == []


async def test_a_run_killed_before_the_ack_is_uncertain_and_sent_once(
    database: Database,
) -> None:
    peer = FakePeer()
    arrived = asyncio.Event()

    async def hang(params: dict[str, Any]) -> dict[str, Any]:
        arrived.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    peer.methods["SendMessage"] = hang
    tools = tools_for(database, peer, peer_request_seconds=60)
    first = asyncio.create_task(call(tools, config(), "a2a_send", ctx(), agent="helper", text="x"))
    await arrived.wait()
    first.cancel()  # the worker dies with the request in flight
    with pytest.raises(asyncio.CancelledError):
        await first
    peer.methods["SendMessage"] = lambda p: {"task": task("p-1", "TASK_STATE_SUBMITTED")}
    again = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x")
    assert again["error"] == "DELIVERY_UNCERTAIN" and again["resumed"] is True
    assert len(peer.sent) == 1


async def test_an_acked_rerun_observes_without_sending_again(database: Database) -> None:
    peer = FakePeer()
    working_then_done(peer, "the answer")
    tools = tools_for(database, peer)
    first = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x", wait=False)
    assert first["state"] == "TASK_STATE_SUBMITTED"
    again = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x")
    assert again["ok"] and again["resumed"] is True and again["state"] == "TASK_STATE_COMPLETED"
    assert again["text"] == "the answer" and again["messageId"] == first["messageId"]
    assert len(peer.sent) == 1
    other = await call(tools, config(), "a2a_send", ctx("call-2"), agent="helper", text="y")
    assert other["messageId"] != first["messageId"] and len(peer.sent) == 2  # a new call


async def test_a_retargeted_name_does_not_observe_the_old_send(database: Database) -> None:
    peer = FakePeer()
    working_then_done(peer)
    tools = tools_for(database, peer)
    await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x", wait=False)
    moved = config().model_copy(
        update={
            "agents": {
                "helper": config()
                .agents["helper"]
                .model_copy(update={"url": "http://127.0.0.1:7302"})
            }
        }
    )
    got = await call(tools, moved, "a2a_send", ctx(), agent="helper", text="x")
    assert got["error"] == "ENDPOINT_CHANGED" and len(peer.sent) == 1


@pytest.mark.parametrize("ack_id", ["..", "../admin", "a/b"])
async def test_a_task_id_the_peer_acknowledges_with_is_not_followed_when_unsafe(
    database: Database, ack_id: str
) -> None:
    """The peer took the message (acknowledged: never sent again), but its task id could move
    our next request off the task's path: it is neither read nor shown as a task id."""
    peer = FakePeer()
    peer.methods["SendMessage"] = lambda p: {"task": task(ack_id, "TASK_STATE_SUBMITTED")}
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_COMPLETED", "x")
    tools = tools_for(database, peer)
    got, again = await _sent_twice(tools)
    assert got["error"] == "BAD_RESPONSE" and "taskId" not in got
    assert again["error"] == "BAD_RESPONSE" and again["resumed"] is True
    assert len(peer.sent) == 1 and "GetTask" not in peer.calls
    found = await open_storage(database).peer_sends.find("acme", "t-1:call-1")
    assert found is not None and found.status == "acked" and found.peer_task_id is None


async def _within_tool_deadline(tools: Any, cfg: Any, name: str, **args: Any) -> Any:
    """The call as the agent's loop runs it: cut off at ``tool_timeout_seconds``
    (``app.agents.llm.batch``), which would leave the model with neither id nor state."""
    async with asyncio.timeout(cfg.tool_timeout_seconds):
        return await call(tools, cfg, name, ctx(), agent="helper", **args)


async def test_a_slow_acknowledged_send_answers_with_its_task_before_the_tool_deadline(
    database: Database,
) -> None:
    peer = FakePeer()

    async def slow_ack(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(1.5)
        return {"task": task("p-1", "TASK_STATE_SUBMITTED")}

    peer.methods["SendMessage"] = slow_ack
    peer.methods["GetTask"] = hang
    cfg = config(tool_timeout_seconds=3)
    tools = tools_for(database, peer, peer_request_seconds=2.0)
    got = await _within_tool_deadline(tools, cfg, "a2a_send", text="x")
    assert got["error"] == "TIMEOUT" and got["taskId"] == "p-1" and got["messageId"]
    # what the model is told such an answer means
    told = " ".join(tool(tools, cfg, "a2a_send").description.split())
    assert "TIMEOUT with a ``taskId`` means it arrived" in told
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_COMPLETED", "late")
    again = await call(tools, cfg, "a2a_send", ctx(), agent="helper", text="x")
    assert again["text"] == "late" and again["resumed"] is True and len(peer.sent) == 1


async def test_a_send_cut_by_the_tool_deadline_before_the_ack_is_uncertain(
    database: Database,
) -> None:
    peer = FakePeer()

    peer.methods["SendMessage"] = hang
    cfg = config(tool_timeout_seconds=2)
    tools = tools_for(database, peer, peer_request_seconds=10.0)
    got = await _within_tool_deadline(tools, cfg, "a2a_send", text="x")
    assert got["error"] == "DELIVERY_UNCERTAIN" and got["cause"] == "TIMEOUT"
    assert len(peer.sent) == 1


async def test_a_slow_wait_answers_with_the_task_id_before_the_tool_deadline(
    database: Database,
) -> None:
    peer = FakePeer()
    card = peer.card()

    async def slow_card() -> httpx.Response:
        await asyncio.sleep(1.5)
        return httpx.Response(200, json=card)

    peer.card_override = slow_card
    peer.methods["GetTask"] = hang
    peer.methods["CancelTask"] = hang
    cfg = config(tool_timeout_seconds=3)
    tools = tools_for(database, peer, peer_request_seconds=2.0)
    read = await _within_tool_deadline(tools, cfg, "a2a_get_task", task_id="p-1", wait=True)
    cancel = await _within_tool_deadline(tools, cfg, "a2a_cancel_task", task_id="p-1")
    assert read["error"] == cancel["error"] == "TIMEOUT"
    assert read["taskId"] == cancel["taskId"] == "p-1"


async def test_two_runs_of_one_call_at_once_send_it_once(database: Database) -> None:
    """A duplicate dispatch: two workers run the same tool call at the same moment, both past
    the lookup before either records its intent. One sends; the other is told it is uncertain."""
    peer = FakePeer()
    both = asyncio.Barrier(2)

    async def card_once_both_asked() -> httpx.Response:
        await both.wait()
        return httpx.Response(200, json=peer.card())

    peer.card_override = card_once_both_asked
    peer.methods["SendMessage"] = lambda p: {"task": task("p-1", "TASK_STATE_SUBMITTED")}
    one, two = tools_for(database, peer), tools_for(database, peer)
    runs = [
        call(w, config(), "a2a_send", ctx(), agent="helper", text="x", wait=False)
        for w in (one, two)
    ]
    first, second = await asyncio.gather(*runs)
    assert sorted(
        [first.get("state") or first["error"], second.get("state") or second["error"]]
    ) == [
        "DELIVERY_UNCERTAIN",
        "TASK_STATE_SUBMITTED",
    ]
    assert len(peer.sent) == 1 and first["messageId"] == second["messageId"]


async def test_garbage_in_answer_to_a_send_is_uncertain_and_never_sent_again(
    database: Database,
) -> None:
    """The request left and the answer cannot be read: the peer may have the message."""
    peer = FakePeer()
    peer.methods["SendMessage"] = lambda p: httpx.Response(200, content=b"<html>oops</html>")
    tools = tools_for(database, peer)
    got, again = await _sent_twice(tools)
    assert got["error"] == "DELIVERY_UNCERTAIN" and got["cause"] == "BAD_RESPONSE"
    assert again["error"] == "DELIVERY_UNCERTAIN" and again["resumed"] is True
    assert len(peer.sent) == 1


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (-32603, "DELIVERY_UNCERTAIN"),  # internal error: perhaps after it took the message
        (-32006, "DELIVERY_UNCERTAIN"),  # invalid agent response: likewise
        (-32099, "DELIVERY_UNCERTAIN"),  # a code outside A2A's table: not a known refusal
        (-32602, "PEER_ERROR"),  # invalid params: refused before any work
        (-32005, "PEER_ERROR"),  # content type not supported: likewise
    ],
)
async def test_only_an_a2a_refusal_counts_as_not_taken(
    database: Database, code: int, error: str
) -> None:
    peer = FakePeer()
    failure = {"code": code, "message": "boom at /srv/secret-diagnostic"}
    peer.methods["SendMessage"] = lambda p: httpx.Response(
        200, json={"jsonrpc": "2.0", "id": "1", "error": failure}
    )
    tools = tools_for(database, peer)
    got, again = await _sent_twice(tools)
    assert got["error"] == again["error"] == error and again["resumed"] is True
    assert "secret-diagnostic" not in json.dumps([got, again]) and len(peer.sent) == 1
