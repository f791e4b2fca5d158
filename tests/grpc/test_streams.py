"""SendStreamingMessage and SubscribeToTask as gRPC server streams (A2A §10.7), on both
backends: the Task first, then every update in order, ending at a terminal or interrupted
state; a terminal task to subscribe to, another caller's task, the stream bounds, and a
client that goes away giving its slot back."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from tests.grpc.conftest import OTHER, GrpcEdge, error_info, text_message
from tests.polling import poll_until

TaskState = a2a_pb2.TaskState


def _send(message_id: str, text: str, **message: Any) -> a2a_pb2.SendMessageRequest:
    doc = {"tenant": "open", "message": text_message(message_id, text, **message)}
    return json_format.ParseDict(doc, a2a_pb2.SendMessageRequest())


def _state(event: a2a_pb2.StreamResponse) -> int:
    if event.HasField("task"):
        return int(event.task.status.state)
    return int(event.status_update.status.state)


async def _events(call: Any) -> list[a2a_pb2.StreamResponse]:
    return [event async for event in call]


async def test_a_streamed_turn_is_the_task_then_its_updates_in_order(live: GrpcEdge):
    script = 'progress one\nartifact text A\nprogress two\nartifact data {"n": 1}\nreply done'
    events = await _events(
        live.stub.SendStreamingMessage(_send("s-1", script), metadata=live.metadata())
    )
    first, *updates = events
    assert first.WhichOneof("payload") == "task"
    assert first.task.status.state == TaskState.TASK_STATE_SUBMITTED
    kinds = [e.WhichOneof("payload") for e in updates]
    assert kinds[-1] == "status_update"
    assert updates[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert updates[-1].status_update.status.message.parts[0].text == "done"
    progress = [
        e.status_update.status.message.parts[0].text
        for e in updates
        if e.HasField("status_update")
        and e.status_update.status.state == TaskState.TASK_STATE_WORKING
        and e.status_update.status.message.parts
    ]
    assert progress == ["one", "two"]
    artifacts = [e.artifact_update.artifact for e in updates if e.HasField("artifact_update")]
    assert [a.parts[0].text for a in artifacts[:1]] == ["A"]
    assert json_format.MessageToDict(artifacts[1].parts[0]) == {"data": {"n": 1}}
    for event in updates:
        inner = getattr(event, event.WhichOneof("payload"))
        assert inner.task_id == first.task.id
        assert inner.context_id == first.task.context_id
    order = [TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]
    order.append(TaskState.TASK_STATE_COMPLETED)
    seen = [_state(e) for e in events if not e.HasField("artifact_update")]
    assert seen == sorted(seen, key=order.index)


async def test_an_interrupted_state_ends_the_stream_and_the_answer_streams_on(live: GrpcEdge):
    events = await _events(
        live.stub.SendStreamingMessage(
            _send("q-1", "ask which color?\nreply {answer} it is"), metadata=live.metadata()
        )
    )
    assert _state(events[-1]) == TaskState.TASK_STATE_INPUT_REQUIRED
    task_id = events[0].task.id
    resumed = await _events(
        live.stub.SendStreamingMessage(
            _send("q-2", "blue", taskId=task_id), metadata=live.metadata()
        )
    )
    assert resumed[0].task.id == task_id
    assert _state(resumed[-1]) == TaskState.TASK_STATE_COMPLETED
    assert resumed[-1].status_update.status.message.parts[0].text == "blue it is"


async def test_subscribe_to_a_running_task(live: GrpcEdge):
    answer = await live.stub.SendMessage(
        json_format.ParseDict(
            {
                "tenant": "open",
                "message": text_message("r-1", "progress started\nsleep 0.5\nreply finished"),
                "configuration": {"returnImmediately": True},
            },
            a2a_pb2.SendMessageRequest(),
        ),
        metadata=live.metadata(),
    )
    task_id = answer.task.id
    events = await _events(
        live.stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(tenant="open", id=task_id), metadata=live.metadata()
        )
    )
    assert events[0].task.id == task_id
    assert _state(events[-1]) == TaskState.TASK_STATE_COMPLETED
    # Finished: a second subscription is refused (A2A §10.4.6), UNIMPLEMENTED (A2A 1.0.0 §5.4).
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _events(
            live.stub.SubscribeToTask(
                a2a_pb2.SubscribeToTaskRequest(tenant="open", id=task_id),
                metadata=live.metadata(),
            )
        )
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert error_info(refused.value).reason == "UNSUPPORTED_OPERATION"


async def test_another_callers_task_is_not_found_on_a_stream(live: GrpcEdge):
    answer = await live.stub.SendMessage(
        json_format.ParseDict(
            {
                "tenant": "open",
                "message": text_message("o-1", "sleep 30"),
                "configuration": {"returnImmediately": True},
            },
            a2a_pb2.SendMessageRequest(),
        ),
        metadata=live.metadata(),
    )
    with pytest.raises(grpc.aio.AioRpcError) as hidden:
        await _events(
            live.stub.SubscribeToTask(
                a2a_pb2.SubscribeToTaskRequest(tenant="open", id=answer.task.id),
                metadata=live.metadata(identity=OTHER),
            )
        )
    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_info(hidden.value).reason == "TASK_NOT_FOUND"
    await _cancel(live, answer.task.id)


async def test_stream_bounds_and_a_departed_client_frees_its_slot(live: GrpcEdge):
    slots = live.edge.services.metrics.streams_open
    calls = [
        live.stub.SendStreamingMessage(_send(f"b-{i}", "sleep 30"), metadata=live.metadata())
        for i in range(2)
    ]
    task_ids = []
    for call in calls:
        first = await call.read()
        task_ids.append(first.task.id)
    # Per identity (2): the third of this caller is refused before anything is accepted.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _events(
            live.stub.SendStreamingMessage(_send("b-3", "sleep 30"), metadata=live.metadata())
        )
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(refused.value).reason == "RESOURCE_EXHAUSTED"
    assert error_info(refused.value).metadata["scope"] == "identity"
    # The clients go away: their slots come back (the gauge counts this process's streams).
    for call in calls:
        call.cancel()

    async def freed() -> bool:
        return _gauge(slots) == 0

    await poll_until(freed, 10, what="stream slots given back")
    again = live.stub.SendStreamingMessage(_send("b-4", "reply back"), metadata=live.metadata())
    assert (await again.read()).HasField("task")
    again.cancel()
    for task_id in task_ids:
        await _cancel(live, task_id)


async def _cancel(live: GrpcEdge, task_id: str) -> None:
    await live.stub.CancelTask(
        a2a_pb2.CancelTaskRequest(tenant="open", id=task_id), metadata=live.metadata()
    )


def _gauge(gauge: Any) -> float:
    return float(gauge.collect()[0].samples[0].value)
