"""SendStreamingMessage and SubscribeToTask over SSE (A2A 1.0 §3.1.2, §3.1.6), on both
backends: the order of events of a scripted turn, subscribing to a running task, isolation
(-32001), a terminal task (-32004), the bounds (-32000), a disconnecting subscriber and
heartbeats."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.db.shared.task_events import SharedTaskEvents
from app.tasks import states
from app.testing.edge import EdgeHarness, edge_harness
from tests.polling import poll_until
from tests.tasks.conftest import send_params
from tests.tasks.sse_client import SseCall

OTHER = {"key": "user-2", "name": "Other", "kind": "user"}


@pytest.fixture
async def live(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(
        db_url,
        background=True,
        stream_max_per_identity=2,
        stream_max_per_process=3,
        stream_heartbeat_seconds=0.2,
        stream_poll_seconds=0.05,
    ) as harness:
        await harness.add_tenant("open", agent="scripted", require_push_config=False)
        harness.default_tenant = "open"
        yield harness


def _state(result: dict[str, Any]) -> str:
    if "task" in result:
        return str(result["task"]["status"]["state"])
    return str(result["statusUpdate"]["status"]["state"])


def _text(status: dict[str, Any]) -> str | None:
    message = status.get("message")
    return None if message is None else str(message["parts"][0]["text"])


async def _start(edge: EdgeHarness, script: str, message_id: str = "m-1", **kw: Any) -> str:
    params = send_params(message_id, script, push=None, returnImmediately=True)
    task = (await edge.result("SendMessage", params, **kw))["task"]
    return str(task["id"])


async def _state_of(edge: EdgeHarness, task_id: str, wanted: str) -> None:
    async def reached() -> bool | None:
        got = await edge.result("GetTask", {"id": task_id})
        return True if got["status"]["state"] == wanted else None

    await poll_until(reached, 10, interval=0.02, what=wanted)


async def test_a_scripted_turn_streams_every_event_in_order(live: EdgeHarness):
    script = 'progress one\nartifact text A\nprogress two\nartifact data {"n": 1}\nreply done'
    params = send_params("s-1", script, push=None)
    async with SseCall(live, "SendStreamingMessage", params) as call:
        assert call.status == 200
        assert call.headers["content-type"] == "text/event-stream"
        results = await call.events()
    first, *updates = results
    assert first["task"]["status"]["state"] == states.SUBMITTED
    task_id = first["task"]["id"]
    kinds = [next(iter(r)) for r in updates]
    assert kinds[-1] == "statusUpdate"
    assert _state(updates[-1]) == states.COMPLETED
    assert _text(updates[-1]["statusUpdate"]["status"]) == "done"
    progress = [
        _text(r["statusUpdate"]["status"])
        for r in updates
        if "statusUpdate" in r and _state(r) == states.WORKING
    ]
    assert [p for p in progress if p] == ["one", "two"]
    artifacts = [r["artifactUpdate"] for r in updates if "artifactUpdate" in r]
    assert [a["artifact"]["parts"][0] for a in artifacts] == [{"text": "A"}, {"data": {"n": 1}}]
    assert kinds.index("artifactUpdate") < len(kinds) - 1
    for update in updates:
        event = next(iter(update.values()))
        assert event["taskId"] == task_id
        assert event["contextId"] == first["task"]["contextId"]
    # Every state change is there once, in order: no state goes back.
    order = [states.SUBMITTED, states.WORKING, states.COMPLETED]
    seen = [_state(r) for r in results if "artifactUpdate" not in r]
    assert seen == sorted(seen, key=order.index)


async def test_the_stream_of_a_new_task_starts_at_its_creation(
    live: EdgeHarness, monkeypatch: pytest.MonkeyPatch
):
    """However far the worker took the task before the stream read its log (here: all the
    way), the stream of the call that created it shows it SUBMITTED, then every change."""
    read_head = SharedTaskEvents.head

    def after_the_turn(read: Any) -> Any:
        async def wrapped(self: SharedTaskEvents, scope: Any, task_id: str) -> Any:
            async def finished() -> bool | None:
                head = await read_head(self, scope, task_id)
                return True if head and head.status["state"] == states.COMPLETED else None

            await poll_until(finished, 10, interval=0.02, what="the turn's end")
            return await read(self, scope, task_id)

        return wrapped

    monkeypatch.setattr(SharedTaskEvents, "head", after_the_turn(SharedTaskEvents.head))
    monkeypatch.setattr(SharedTaskEvents, "first", after_the_turn(SharedTaskEvents.first))
    params = send_params("s-late", "progress one\nartifact text A\nreply done", push=None)
    async with SseCall(live, "SendStreamingMessage", params) as call:
        results = await call.events()
    states_seen = [_state(r) for r in results if "artifactUpdate" not in r]
    assert states_seen[0] == states.SUBMITTED and states_seen[-1] == states.COMPLETED
    progress = [_text(r["statusUpdate"]["status"]) for r in results if "statusUpdate" in r]
    assert "one" in progress
    assert [
        r["artifactUpdate"]["artifact"]["parts"][0] for r in results[1:] if "artifactUpdate" in r
    ] == [{"text": "A"}]


async def test_subscribe_to_a_running_task(live: EdgeHarness):
    task_id = await _start(live, "progress started\nsleep 0.5\nprogress later\nreply finished")
    await _state_of(live, task_id, states.WORKING)
    async with SseCall(live, "SubscribeToTask", {"id": task_id}) as call:
        results = await call.events()
    assert results[0]["task"]["id"] == task_id
    assert results[0]["task"]["status"]["state"] == states.WORKING
    assert _state(results[-1]) == states.COMPLETED
    texts = [_text(r["statusUpdate"]["status"]) for r in results[1:] if "statusUpdate" in r]
    assert texts[-2:] == ["later", "finished"]


async def test_an_interrupted_state_ends_the_stream(live: EdgeHarness):
    async with SseCall(
        live, "SendStreamingMessage", send_params("q-1", "ask which color?", push=None)
    ) as call:
        results = await call.events()
    assert _state(results[-1]) == states.INPUT_REQUIRED
    task_id = results[0]["task"]["id"]
    # The answer, streamed: the same task from SUBMITTED on to its end.
    answer = send_params("q-2", "blue", push=None, task_id=task_id)
    async with SseCall(live, "SendStreamingMessage", answer) as call:
        resumed = await call.events()
    assert resumed[0]["task"]["id"] == task_id
    assert resumed[0]["task"]["status"]["state"] == states.SUBMITTED
    assert _state(resumed[-1]) == states.COMPLETED


async def test_a_subscription_goes_on_through_an_interruption_to_a_terminal_state(
    live: EdgeHarness,
):
    # A2A §3.1.6: SubscribeToTask serves any non-terminal task and ends at a terminal state.
    task_id = await _start(live, "ask which color?\nreply {answer} it is")
    await _state_of(live, task_id, states.INPUT_REQUIRED)
    async with SseCall(live, "SubscribeToTask", {"id": task_id}) as call:
        answer = send_params("q-2", "blue", push=None, task_id=task_id, returnImmediately=True)
        await live.result("SendMessage", answer)
        results = await call.events()
    assert results[0]["task"]["status"]["state"] == states.INPUT_REQUIRED
    assert _state(results[-1]) == states.COMPLETED
    assert _text(results[-1]["statusUpdate"]["status"]) == "blue it is"


async def test_another_callers_task_is_not_found(live: EdgeHarness):
    task_id = await _start(live, "sleep 5\nreply late")
    for params in ({"id": task_id}, {"id": "no-such-task"}):
        async with SseCall(live, "SubscribeToTask", params, identity=OTHER) as call:
            assert call.headers["content-type"].startswith("application/json")
            error = json.loads(await call.body())["error"]
        assert error["code"] == -32001
    await live.result("CancelTask", {"id": task_id})


async def test_a_terminal_task_cannot_be_subscribed(live: EdgeHarness):
    task_id = await _start(live, "reply quick")
    await _state_of(live, task_id, states.COMPLETED)
    response = await live.rpc("SubscribeToTask", {"id": task_id})
    assert response.json()["error"]["code"] == -32004


async def test_bounds_refuse_before_streaming_and_a_disconnect_frees_the_slot(live: EdgeHarness):
    task_id = await _start(live, "sleep 30\nreply late")
    third = {"key": "user-3"}
    async with (
        SseCall(live, "SubscribeToTask", {"id": task_id}) as one,
        SseCall(live, "SubscribeToTask", {"id": task_id}) as two,
    ):
        assert (await one.event())["result"]["task"]["id"] == task_id
        assert (await two.event())["result"]["task"]["id"] == task_id
        # Per identity (2): a third stream of the same caller is refused.
        response = await live.rpc("SubscribeToTask", {"id": task_id})
        error = response.json()["error"]
        assert error["code"] == -32000
        assert error["data"][0]["reason"] == "RESOURCE_EXHAUSTED"
        refused = await live.rpc("SendStreamingMessage", send_params("x-1", "reply no", push=None))
        assert refused.json()["error"]["code"] == -32000
        # Refused before anything was accepted.
        assert (await live.rpc("GetTask", {"id": "x-1"})).json()["error"]["code"] == -32001
        own_task = await _start(live, "sleep 30\nreply late", "o-1", identity=third)
        async with SseCall(live, "SubscribeToTask", {"id": task_id}, identity=third) as own:
            # user-3 cannot see user-1's task: -32001, and its slot is given back at once.
            assert json.loads(await own.body())["error"]["code"] == -32001
        await one.disconnect()
        async with (
            SseCall(live, "SubscribeToTask", {"id": task_id}) as again,
            SseCall(live, "SubscribeToTask", {"id": own_task}, identity=third) as mine,
        ):
            assert (await again.event())["result"]["task"]["id"] == task_id
            assert (await mine.event())["result"]["task"]["id"] == own_task
            # Per process (3): two of user-1 and one of user-3 are open now.
            response = await live.rpc("SubscribeToTask", {"id": "any"}, identity=OTHER)
            error = response.json()["error"]
            assert error["code"] == -32000
            assert error["data"][0]["metadata"]["scope"] == "process"
    await live.result("CancelTask", {"id": task_id})
    await live.result("CancelTask", {"id": own_task}, identity=third)


async def test_heartbeats_while_nothing_happens_and_cancel_ends_the_stream(live: EdgeHarness):
    task_id = await _start(live, "sleep 30\nreply late")
    await _state_of(live, task_id, states.WORKING)
    async with SseCall(live, "SubscribeToTask", {"id": task_id}) as call:
        assert (await call.event())["result"]["task"]["id"] == task_id
        await asyncio.sleep(0.7)
        await live.result("CancelTask", {"id": task_id})
        results = await call.events()
        assert call.heartbeats >= 2
    assert _state(results[-1]) == states.CANCELED


@pytest.mark.postgres
async def test_on_postgres_a_notification_wakes_the_stream_long_before_its_poll(pg_url: str):
    async with edge_harness(pg_url, background=True, poll_seconds=30) as edge:
        await edge.add_tenant("open", agent="scripted", require_push_config=False)
        edge.default_tenant = "open"
        task_id = await _start(edge, "sleep 0.5\nprogress a\nsleep 0.3\nreply b")
        await _state_of(edge, task_id, states.WORKING)
        started = asyncio.get_running_loop().time()
        async with SseCall(edge, "SubscribeToTask", {"id": task_id}) as call:
            results = await call.events(timeout=10)
        assert _state(results[-1]) == states.COMPLETED
        assert asyncio.get_running_loop().time() - started < 10


async def test_a_reader_that_never_reads_holds_the_stream_back_not_the_edge(live: EdgeHarness):
    """Events are read from the database as the client takes them: a client that takes nothing
    after the first event leaves the stream's reads where they were, however many events the
    turn writes; its disconnect then frees the slot."""
    store = live.services.db.storage.task_events
    reads = 0
    original = store.after

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await original(*args, **kwargs)

    store.after = counted  # type: ignore[method-assign]
    script = "sleep 0.3\n" + "".join(f"progress p{i}\n" for i in range(40)) + "reply done"
    task_id = await _start(live, script)
    async with SseCall(live, "SubscribeToTask", {"id": task_id}) as call:
        call.stall_after(1)  # the client's buffer is full after the first event
        await _state_of(live, task_id, states.COMPLETED)
        await asyncio.sleep(0.3)
        assert reads <= 2
        await call.disconnect()
    # Its slot is free again: two more streams of this caller are allowed.
    other = await _start(live, "sleep 30\nreply late", "m-2")
    async with (
        SseCall(live, "SubscribeToTask", {"id": other}) as one,
        SseCall(live, "SubscribeToTask", {"id": other}) as two,
    ):
        assert (await one.event())["result"]["task"]["id"] == other
        assert (await two.event())["result"]["task"]["id"] == other
    await live.result("CancelTask", {"id": other})


async def test_open_streams_are_a_metric(live: EdgeHarness):
    task_id = await _start(live, "sleep 30\nreply late")
    async with SseCall(live, "SubscribeToTask", {"id": task_id}) as call:
        await call.event()
        metrics = (await live.client.get("/metrics")).text
        assert "edge_streams_open 1.0" in metrics
        await call.disconnect()
    assert "edge_streams_open 0.0" in (await live.client.get("/metrics")).text
    await live.result("CancelTask", {"id": task_id})
