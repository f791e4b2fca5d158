"""Every unary method of the A2A gRPC service (A2A §10.4) over a real grpc.aio channel against
a running edge, on both backends: the answers are the JSON-RPC answers in proto form."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from app.tasks import states
from tests.grpc.conftest import GrpcEdge, error_info, text_message
from tests.polling import poll_until


def _send(message_id: str, text: str, **configuration: Any) -> a2a_pb2.SendMessageRequest:
    doc: dict[str, Any] = {"tenant": "open", "message": text_message(message_id, text)}
    if configuration:
        doc["configuration"] = configuration
    return json_format.ParseDict(doc, a2a_pb2.SendMessageRequest())


async def _settled(live: GrpcEdge, task_id: str, wanted: int) -> a2a_pb2.Task:
    async def reached() -> a2a_pb2.Task | None:
        task = await live.stub.GetTask(
            a2a_pb2.GetTaskRequest(tenant="open", id=task_id), metadata=live.metadata()
        )
        return task if task.status.state == wanted else None

    return await poll_until(reached, 10, interval=0.05, what=a2a_pb2.TaskState.Name(wanted))


async def test_send_message_then_get_list_and_cancel(live: GrpcEdge):
    answer = await live.stub.SendMessage(
        _send("u-1", "reply hello there", returnImmediately=True), metadata=live.metadata()
    )
    assert answer.WhichOneof("payload") == "task"
    task_id = answer.task.id
    assert answer.task.status.state == a2a_pb2.TaskState.TASK_STATE_SUBMITTED
    done = await _settled(live, task_id, a2a_pb2.TaskState.TASK_STATE_COMPLETED)
    assert done.status.message.parts[0].text == "hello there"
    # The same task over JSON-RPC, field for field.
    over_jsonrpc = await live.edge.result("GetTask", {"id": task_id})
    assert json_format.MessageToDict(done) == over_jsonrpc

    listed = await live.stub.ListTasks(
        a2a_pb2.ListTasksRequest(tenant="open", page_size=10), metadata=live.metadata()
    )
    assert [t.id for t in listed.tasks] == [task_id]
    assert listed.total_size == 1

    # A finished task cannot be canceled: FAILED_PRECONDITION, TASK_NOT_CANCELABLE.
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await live.stub.CancelTask(
            a2a_pb2.CancelTaskRequest(tenant="open", id=task_id), metadata=live.metadata()
        )
    assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(failed.value).reason == "TASK_NOT_CANCELABLE"
    assert error_info(failed.value).domain == "a2a-protocol.org"


async def test_a_blocking_send_answers_with_the_agents_message(live: GrpcEdge):
    answer = await live.stub.SendMessage(_send("u-2", "message hi"), metadata=live.metadata())
    assert answer.WhichOneof("payload") == "message"
    assert answer.message.parts[0].text == "hi"
    assert answer.message.role == a2a_pb2.Role.ROLE_AGENT


async def test_cancel_a_running_task(live: GrpcEdge):
    answer = await live.stub.SendMessage(
        _send("u-3", "sleep 30\nreply late", returnImmediately=True), metadata=live.metadata()
    )
    task_id = answer.task.id
    await _settled(live, task_id, a2a_pb2.TaskState.TASK_STATE_WORKING)
    canceled = await live.stub.CancelTask(
        a2a_pb2.CancelTaskRequest(tenant="open", id=task_id), metadata=live.metadata()
    )
    assert canceled.id == task_id
    assert canceled.status.state == a2a_pb2.TaskState.TASK_STATE_CANCELED


async def test_push_config_methods(live: GrpcEdge):
    answer = await live.stub.SendMessage(
        _send("u-4", "sleep 30", returnImmediately=True), metadata=live.metadata()
    )
    task_id = answer.task.id
    created = await live.stub.CreateTaskPushNotificationConfig(
        a2a_pb2.TaskPushNotificationConfig(
            tenant="open",
            task_id=task_id,
            id="hook-1",
            url="https://hooks.example.com/a2a",
            token="client-token",
            authentication=a2a_pb2.AuthenticationInfo(scheme="Bearer", credentials="s3cret"),
        ),
        metadata=live.metadata(),
    )
    assert (created.task_id, created.id, created.url) == (
        task_id,
        "hook-1",
        "https://hooks.example.com/a2a",
    )
    assert "s3cret" not in created.SerializeToString().decode("utf-8", "replace")
    got = await live.stub.GetTaskPushNotificationConfig(
        a2a_pb2.GetTaskPushNotificationConfigRequest(tenant="open", task_id=task_id, id="hook-1"),
        metadata=live.metadata(),
    )
    assert got.url == created.url
    listed = await live.stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(tenant="open", task_id=task_id),
        metadata=live.metadata(),
    )
    assert [c.id for c in listed.configs] == ["hook-1"]
    request = a2a_pb2.DeleteTaskPushNotificationConfigRequest(
        tenant="open", task_id=task_id, id="hook-1"
    )
    await live.stub.DeleteTaskPushNotificationConfig(request, metadata=live.metadata())
    # Idempotent (CONTRACT §5).
    await live.stub.DeleteTaskPushNotificationConfig(request, metadata=live.metadata())
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await live.stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(
                tenant="open", task_id=task_id, id="hook-1"
            ),
            metadata=live.metadata(),
        )
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    await live.stub.CancelTask(
        a2a_pb2.CancelTaskRequest(tenant="open", id=task_id), metadata=live.metadata()
    )


async def test_get_extended_agent_card_is_the_signed_tenant_card(live: GrpcEdge):
    card = await live.stub.GetExtendedAgentCard(
        a2a_pb2.GetExtendedAgentCardRequest(tenant="open"), metadata=live.metadata()
    )
    over_jsonrpc = await live.edge.result("GetExtendedAgentCard", {})
    # The signed document survives the proto round trip unchanged (CONTRACT §4 fixed point).
    assert json_format.MessageToDict(card) == over_jsonrpc
    assert card.signatures


async def test_get_task_history_length(live: GrpcEdge):
    answer = await live.stub.SendMessage(
        _send("u-5", "reply ok", returnImmediately=True), metadata=live.metadata()
    )
    await _settled(live, answer.task.id, a2a_pb2.TaskState.TASK_STATE_COMPLETED)
    none = await live.stub.GetTask(
        a2a_pb2.GetTaskRequest(tenant="open", id=answer.task.id, history_length=0),
        metadata=live.metadata(),
    )
    assert not none.history
    full = await live.stub.GetTask(
        a2a_pb2.GetTaskRequest(tenant="open", id=answer.task.id), metadata=live.metadata()
    )
    assert full.history
    assert a2a_pb2.TaskState.Name(full.status.state) == states.COMPLETED
