"""The A2A tools against a scripted peer (issue 54): each tool's answer, the state always
there, faults with a clear code (down, slow, garbage, redirects, key changes, ids), the peer's
card, our credentials, logs and metrics. Storage on both backends."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import time
from typing import Any

import httpx
import pytest

from app.agents.llm.peer_directory import BearerEnv
from app.db.engine import Database
from app.db.storage import open_storage
from tests.peers.kit import (
    ORIGIN,
    RPC_URL,
    FakePeer,
    call,
    config,
    ctx,
    new_key,
    raw_call,
    sse,
    task,
    tool,
    tools_for,
    working_then_done,
)


async def test_a_send_waits_for_the_task_and_answers_framed(database: Database) -> None:
    peer = FakePeer()
    working_then_done(peer)
    tools = tools_for(database, peer)
    got = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="6 x 7?")
    assert got["ok"] and got["state"] == "TASK_STATE_COMPLETED" and got["text"] == "42"
    assert got["taskId"] == "p-1" and got["truncated"] is False
    assert peer.sent == [got["messageId"]]
    assert peer.headers[0]["authorization"] == "Bearer t0k3n"  # bearer_env, from the environ
    labels = {"tool": "a2a_send", "outcome": "TASK_STATE_COMPLETED"}
    assert tools.metrics.registry.get_sample_value("edge_peer_calls_total", labels) == 1
    found = await open_storage(database).peer_sends.find("acme", "t-1:call-1")
    assert found is not None and found.status == "acked" and found.peer_task_id == "p-1"


async def test_without_wait_the_state_is_the_acknowledged_one(database: Database) -> None:
    peer = FakePeer()
    working_then_done(peer)
    got = await call(
        tools_for(database, peer),
        config(),
        "a2a_send",
        ctx(),
        agent="helper",
        text="hi",
        wait=False,
    )
    assert got["ok"] and got["state"] == "TASK_STATE_SUBMITTED" and "GetTask" not in peer.calls


async def test_an_unknown_name_fails_closed(database: Database) -> None:
    peer = FakePeer()
    got = await call(tools_for(database, peer), config(), "a2a_send", ctx(), agent="x", text="hi")
    assert got == {**got, "ok": False, "error": "UNKNOWN_AGENT"}
    assert peer.calls == []  # nothing fetched, nothing sent


async def test_a_slow_card_times_out_before_anything_is_sent(database: Database) -> None:
    peer = FakePeer()

    def slow_card() -> httpx.Response:
        raise httpx.ReadTimeout("slow")

    peer.card_override = slow_card
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["error"] == "TIMEOUT" and peer.sent == []


@pytest.mark.parametrize(
    "body", [b"<html>not json</html>", b'{"jsonrpc": "2.0", "id": "x"}', b'{"result": 7}']
)
async def test_garbage_is_a_bad_response(database: Database, body: bytes) -> None:
    peer = FakePeer()
    peer.methods["GetTask"] = lambda p: httpx.Response(200, content=body)
    got = await call(
        tools_for(database, peer), config(), "a2a_get_task", ctx(), agent="helper", task_id="p-1"
    )
    assert got["ok"] is False and got["error"] == "BAD_RESPONSE" and got["taskId"] == "p-1"


async def test_a_garbage_card_is_a_bad_response(database: Database) -> None:
    peer = FakePeer()
    peer.card_override = lambda: httpx.Response(200, content=b"\x00\xffgarbage")
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["error"] == "BAD_RESPONSE" and peer.sent == []


async def test_a_redirect_is_refused_and_not_followed(database: Database) -> None:
    peer = FakePeer()
    peer.card_override = lambda: httpx.Response(302, headers={"location": "https://evil.example"})
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["error"] == "REDIRECT_REFUSED" and got["code"] == "302"
    assert peer.calls == ["card"]


async def test_a_signed_card_pins_its_key_and_a_change_is_refused(database: Database) -> None:
    peer = FakePeer(signed=True)
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_COMPLETED", "ok")
    tools = tools_for(database, peer)
    args = {"agent": "helper", "task_id": "p-1"}
    assert (await call(tools, config(), "a2a_get_task", ctx(), **args))["ok"]
    assert await open_storage(database).peer_pins.pinned(ORIGIN) is not None
    peer.key = new_key("peer-key-2")
    changed = await call(tools, config(), "a2a_get_task", ctx(), **args)
    assert changed["error"] == "KEY_CHANGED"
    peer.signed = False  # an origin that signed must keep signing
    unsigned = await call(tools, config(), "a2a_get_task", ctx(), **args)
    assert unsigned["error"] == "CARD_REJECTED"
    assert peer.calls.count("GetTask") == 1


async def test_a_card_changed_after_signing_is_refused(database: Database) -> None:
    peer = FakePeer(signed=True)
    signed = peer.card()
    peer.card_override = lambda: httpx.Response(200, json={**signed, "description": "changed"})
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["error"] == "CARD_REJECTED" and peer.sent == []


async def test_cancel_of_a_finished_task_says_why_and_its_state(database: Database) -> None:
    peer = FakePeer()
    error = {"code": -32002, "message": "task done; internal path /srv/secret-diagnostic"}
    peer.methods["CancelTask"] = lambda p: httpx.Response(
        200, json={"jsonrpc": "2.0", "id": "1", "error": error}
    )
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_COMPLETED", "done")
    tools = tools_for(database, peer)
    raw = await raw_call(tools, "a2a_cancel_task", agent="helper", task_id="p-1")
    got = json.loads(raw.partition("\n")[2])
    assert got["ok"] is False and got["error"] == "PEER_ERROR"
    assert got["code"] == "TASK_NOT_CANCELABLE" and got["state"] == "TASK_STATE_COMPLETED"
    assert "secret-diagnostic" not in raw  # the peer's error text is never forwarded


async def test_a_cancel_that_works_returns_the_task(database: Database) -> None:
    peer = FakePeer()
    peer.methods["CancelTask"] = lambda p: task(p["id"], "TASK_STATE_CANCELED")
    got = await call(
        tools_for(database, peer), config(), "a2a_cancel_task", ctx(), agent="helper", task_id="p-1"
    )
    assert got["ok"] and got["state"] == "TASK_STATE_CANCELED" and got["cancelRequested"]


async def test_an_edge_token_names_the_interface_the_tenant_and_us(database: Database) -> None:
    peer = FakePeer()
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_COMPLETED", "ok")
    tools = tools_for(database, peer)
    got = await call(
        tools, config("edge-token"), "a2a_get_task", ctx(), agent="helper", task_id="p-1"
    )
    assert got["ok"]
    token = peer.headers[0]["authorization"].removeprefix("Bearer ")
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    settings = tools.clients._auth._settings
    assert claims["aud"] == RPC_URL and claims["iss"] == settings.public_origin
    assert claims[settings.tenant_claim] == "helper"
    assert claims[settings.identity_claim] == {"key": "acme", "name": "Agent of acme"}


async def test_a_missing_bearer_variable_fails_before_any_request(database: Database) -> None:
    peer = FakePeer()
    tools = tools_for(database, peer, environ={})
    got = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x")
    assert got["error"] == "AUTH_UNAVAILABLE" and "PEER_TOKEN" in got["detail"]
    assert peer.sent == []


async def test_an_interface_off_the_origin_is_not_called(database: Database) -> None:
    peer = FakePeer()
    card = peer.card()
    card["supportedInterfaces"] = [
        {"url": "https://elsewhere.example/a2a", "protocolBinding": "JSONRPC"}
    ]
    peer.card_override = lambda: httpx.Response(200, json=card)
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["error"] == "NO_INTERFACE" and peer.sent == []


async def test_the_agents_tool_lists_live_cards(database: Database) -> None:
    peer = FakePeer(streaming=True)
    got = await call(tools_for(database, peer), config(), "a2a_agents", ctx())
    (entry,) = got["agents"]
    assert entry["name"] == "helper" and entry["cardName"] == "Helper"
    assert entry["skills"][0]["id"] == "qa" and entry["streaming"] is True
    assert entry["inputModes"] == ["text/plain"] and "nextPage" not in got


async def test_no_tools_without_a_directory(database: Database) -> None:
    tools = tools_for(database, FakePeer())
    bare = config().model_copy(update={"agents": {}})
    assert tools.tools(bare) == ()
    assert [t.name for t in tools.tools(config())] == [
        "a2a_agents",
        "a2a_send",
        "a2a_get_task",
        "a2a_cancel_task",
    ]


async def test_a_streaming_peer_is_followed_and_read_once_more(database: Database) -> None:
    peer = FakePeer(streaming=True)
    reads = {"n": 0}

    def get_task(params: dict[str, Any]) -> dict[str, Any]:
        reads["n"] += 1
        if reads["n"] == 1:
            return task(params["id"], "TASK_STATE_WORKING")
        return task(params["id"], "TASK_STATE_COMPLETED", "streamed")

    peer.methods["SendMessage"] = lambda p: {"task": task("p-1", "TASK_STATE_SUBMITTED")}
    peer.methods["GetTask"] = get_task
    peer.methods["SubscribeToTask"] = lambda p: sse(
        {
            "statusUpdate": {
                "taskId": "p-1",
                "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_WORKING"},
            }
        },
        {
            "statusUpdate": {
                "taskId": "p-1",
                "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_COMPLETED"},
            }
        },
    )
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["state"] == "TASK_STATE_COMPLETED" and got["text"] == "streamed"
    assert peer.calls == ["card", "SendMessage", "GetTask", "SubscribeToTask", "GetTask"]


async def test_a_failed_stream_is_reported_not_replaced_by_polling(database: Database) -> None:
    peer = FakePeer(streaming=True)
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_WORKING")
    peer.methods["SubscribeToTask"] = lambda p: httpx.Response(502)
    got = await call(
        tools_for(database, peer),
        config(),
        "a2a_get_task",
        ctx(),
        agent="helper",
        task_id="p-1",
        wait=True,
    )
    assert got["ok"] is False and got["error"] == "HTTP_ERROR" and got["code"] == "502"
    assert peer.calls.count("GetTask") == 2 and peer.calls.count("SubscribeToTask") == 1


@pytest.mark.parametrize("bad", ["../../admin", "a/b", "x?y=1", "a b", "%2e%2e", "", ".", ".."])
async def test_an_id_that_could_leave_its_path_segment_is_refused(
    database: Database, bad: str
) -> None:
    peer = FakePeer()
    tools = tools_for(database, peer)
    read = await call(tools, config(), "a2a_get_task", ctx(), agent="helper", task_id=bad)
    cancel = await call(tools, config(), "a2a_cancel_task", ctx(), agent="helper", task_id=bad)
    send = await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x", context_id=bad)
    assert read["error"] == cancel["error"] == send["error"] == "BAD_ID"
    assert peer.calls == []


async def test_the_agents_tool_pages_and_stays_within_the_output_cap(
    database: Database,
) -> None:
    peer = FakePeer()
    skills = [
        {"id": f"s{i}", "name": f"Skill {i}", "description": "d" * 1000, "tags": ["t"] * 9}
        for i in range(30)
    ]
    peer.card_override = lambda: httpx.Response(200, json={**peer.card(), "skills": skills})
    seven = config(max_tool_output_bytes=8192).model_copy(
        update={"agents": {f"a{i}": config().agents["helper"] for i in range(7)}}
    )
    tools = tools_for(database, peer)
    first = tool(tools, seven, "a2a_agents")
    text = await first.call(ctx(), first.validate({}))
    page = json.loads(text.partition("\n")[2])
    assert len(text.encode()) <= 8192 and page["compact"] is True
    assert [a["name"] for a in page["agents"]] == ["a0", "a1", "a2", "a3", "a4"]
    assert page["nextPage"] == 2 and page["agents"][0]["moreSkills"] == 22
    assert page["agents"][0]["skills"][0] == {"id": "s0", "name": "Skill 0"}
    text = await first.call(ctx(), first.validate({"page": 2}))
    last = json.loads(text.partition("\n")[2])
    assert [a["name"] for a in last["agents"]] == ["a5", "a6"] and "nextPage" not in last


async def test_a_subscription_refused_outright_falls_back_to_reading(database: Database) -> None:
    peer = FakePeer(streaming=True)  # advertises streaming, has no SubscribeToTask (-32601)
    working_then_done(peer, "polled")
    got = await call(
        tools_for(database, peer), config(), "a2a_send", ctx(), agent="helper", text="x"
    )
    assert got["state"] == "TASK_STATE_COMPLETED" and got["text"] == "polled"
    assert peer.calls.count("SubscribeToTask") == 1 and peer.calls.count("GetTask") >= 3


async def test_each_call_logs_our_tenant_task_peer_and_outcome(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    peer = FakePeer()
    working_then_done(peer)
    tools = tools_for(database, peer)
    with caplog.at_level(logging.INFO, logger="looping.peers"):
        await call(tools, config(), "a2a_agents", ctx())
        await call(tools, config(), "a2a_send", ctx(), agent="helper", text="x")
        peer.down = True
        await call(tools, config(), "a2a_agents", ctx())
    lines = [
        (r.tenant, r.task_id, r.peer, r.tool, r.outcome)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "peers.call"
    ]
    assert lines == [
        ("acme", "t-1", "helper", "a2a_agents", "CARD"),
        ("acme", "t-1", "helper", "a2a_send", "TASK_STATE_COMPLETED"),
        ("acme", "t-1", "helper", "a2a_agents", "UNREACHABLE"),
    ]
    counted = tools.metrics.registry.get_sample_value(
        "edge_peer_calls_total", {"tool": "a2a_agents", "outcome": "UNREACHABLE"}
    )
    assert counted == 1
    assert "t0k3n" not in caplog.text  # the bearer token is never logged


async def test_an_edge_setting_is_never_sent_as_a_bearer_token(database: Database) -> None:
    """A directory entry built around the config's checks (stored before them, say) that
    names the edge's signing key: refused before any request, the key never sent."""
    peer = FakePeer()
    cfg = config()
    entry = cfg.agents["helper"]
    auth = BearerEnv.model_construct(bearer_env="A2A_SIGNING_KEY")
    sneaky = cfg.model_copy(update={"agents": {"helper": entry.model_copy(update={"auth": auth})}})
    tools = tools_for(database, peer, environ={"A2A_SIGNING_KEY": "the-private-jwk"})
    got = await call(tools, sneaky, "a2a_send", ctx(), agent="helper", text="x")
    assert got["error"] == "AUTH_UNAVAILABLE" and peer.sent == [] and peer.headers == []


async def test_a_page_of_the_largest_cards_still_fits_the_default_cap(database: Database) -> None:
    """Cards at every bound (names and descriptions of escaped characters): the page stays
    one JSON document within the default 16 KiB cap, never cut mid-document by the loop (the
    agents' names and streaming kept when the compact form is too large)."""
    peer = FakePeer()
    wide = '"\\' * 150  # each character escaped: twice its bytes in JSON
    skills = [
        {"id": f"s{i}{wide}", "name": wide, "description": wide, "tags": [wide] * 5}
        for i in range(10)
    ]
    big = {**peer.card(), "name": wide, "description": wide, "skills": skills}
    big["defaultInputModes"] = big["defaultOutputModes"] = [wide] * 9
    peer.card_override = lambda: httpx.Response(200, json=big)
    five = config(max_tool_output_bytes=16384).model_copy(
        update={"agents": {f"a{i}": config().agents["helper"] for i in range(5)}}
    )
    listing = tool(tools_for(database, peer), five, "a2a_agents")
    text = await listing.call(ctx(), listing.validate({}))
    page = json.loads(text.partition("\n")[2])
    assert len(text.encode()) <= 16384 and [a["name"] for a in page["agents"]] == [
        f"a{i}" for i in range(5)
    ]
    assert page["minimal"] is True and page["agents"][0]["streaming"] is False


async def test_a_removed_pin_lets_a_rotated_key_be_pinned(database: Database) -> None:
    """A peer rotated its key: refused (KEY_CHANGED) until the operator removes the pin
    (``looping-edge peer-pins remove``); then its new key is pinned and calls go through
    (once the new kid may be fetched: EDGE_JWKS_COOLDOWN_SECONDS, none here)."""
    peer = FakePeer(signed=True)
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_COMPLETED", "ok")
    tools = tools_for(database, peer, jwks_cooldown_seconds=0)
    args = {"agent": "helper", "task_id": "p-1"}
    assert (await call(tools, config(), "a2a_get_task", ctx(), **args))["ok"]
    peer.key = new_key("peer-key-2")
    assert (await call(tools, config(), "a2a_get_task", ctx(), **args))["error"] == "KEY_CHANGED"
    assert await open_storage(database).peer_pins.remove(ORIGIN)
    got = await call(tools, config(), "a2a_get_task", ctx(), **args)
    assert got["ok"], got
    assert (await open_storage(database).peer_pins.pinned(ORIGIN) or ("", ""))[1] == "peer-key-2"


async def test_a_wait_reads_once_at_its_deadline_and_not_again(database: Database) -> None:
    """Past the wait's bound the task is answered as last read: no extra request, which a
    slow peer would turn into a TIMEOUT instead of the task's state."""
    peer = FakePeer()
    started: list[float] = []

    def working(params: dict[str, Any]) -> dict[str, Any]:
        started.append(time.monotonic())
        return task(params["id"], "TASK_STATE_WORKING")

    peer.methods["GetTask"] = working
    tools = tools_for(database, peer, peer_wait_seconds=0.3, peer_poll_seconds=0.05)
    begun = time.monotonic()
    args = {"agent": "helper", "task_id": "p-1", "wait": True}
    got = await call(tools, config(), "a2a_get_task", ctx(), **args)
    assert got["ok"] and got["state"] == "TASK_STATE_WORKING"
    assert len([t for t in started if t >= begun + 0.3]) == 1


async def test_only_tasks_the_callers_own_sends_made_are_read_answered_or_cancelled(
    database: Database,
) -> None:
    """Every caller of a tenant is one identity at the peer: a task id alone would let one
    caller's model read, answer or cancel another's task there (or any id it is told)."""
    peer = FakePeer()
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_COMPLETED", "secret answer")
    tools = tools_for(database, peer)
    bob = dataclasses.replace(ctx(), identity_key="bob")
    for who, task_id in ((bob, "p-1"), (ctx(), "p-2")):
        read = await call(tools, config(), "a2a_get_task", who, agent="helper", task_id=task_id)
        cancel = await call(
            tools, config(), "a2a_cancel_task", who, agent="helper", task_id=task_id
        )
        answer = await call(
            tools, config(), "a2a_send", who, agent="helper", text="x", task_id=task_id
        )
        assert read["error"] == cancel["error"] == answer["error"] == "UNKNOWN_TASK"
    assert peer.calls == [] and "secret answer" not in json.dumps([read, cancel, answer])
    mine = await call(tools, config(), "a2a_get_task", ctx(), agent="helper", task_id="p-1")
    assert mine["text"] == "secret answer"  # the caller's own send made p-1 (conftest)
