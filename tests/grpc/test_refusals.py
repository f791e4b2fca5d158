"""What the gRPC binding refuses, and how (A2A §10.6, CONTRACT §3): the token rules with the
gRPC interface url as audience, the tenant rules, the version, isolation between callers,
bad input (INVALID_ARGUMENT, never an unhandled exception) and the bounds. No answer echoes
the token."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from tests.grpc.conftest import OTHER, GrpcEdge, error_info, text_message

METHOD = "/lf.a2a.v1.A2AService/"


async def _refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await call
    return failed.value


def _get(task_id: str = "nope", tenant: str = "open") -> a2a_pb2.GetTaskRequest:
    return a2a_pb2.GetTaskRequest(tenant=tenant, id=task_id)


async def test_no_token_is_unauthenticated(live: GrpcEdge):
    error = await _refused(live.stub.GetTask(_get(), metadata=(("a2a-version", "1.0"),)))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error.details() == "unauthorized: missing bearer token"
    assert error_info(error).reason == "MISSING_BEARER"


async def test_a_bad_token_is_unauthenticated_and_not_echoed(live: GrpcEdge):
    forged = live.token()[:-8] + "AAAAAAAA"
    error = await _refused(live.stub.GetTask(_get(), metadata=live.metadata(forged)))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert forged not in error.details()
    assert forged.split(".")[1] not in str(error.trailing_metadata())
    garbage = await _refused(live.stub.GetTask(_get(), metadata=live.metadata("not-a-jwt")))
    assert garbage.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_json_rpc_audience_token_is_refused_on_grpc_and_the_reverse(live: GrpcEdge):
    jsonrpc_token = live.token(audience=live.edge.settings.endpoint_url)
    error = await _refused(live.stub.GetTask(_get(), metadata=live.metadata(jsonrpc_token)))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error_info(error).reason == "BAD_AUDIENCE"
    # A gRPC token on the JSON-RPC endpoint: 401 there.
    grpc_token = live.token()
    response = await live.edge.rpc("GetTask", {"id": "nope"}, token=grpc_token)
    assert response.status_code == 401
    # The audience is the card's bare host:port, not a URL spelling of it.
    url_spelling = live.token(audience=f"http://{live.audience}")
    error = await _refused(live.stub.GetTask(_get(), metadata=live.metadata(url_spelling)))
    assert error_info(error).reason == "BAD_AUDIENCE"


async def test_two_authorization_entries_are_refused(live: GrpcEdge):
    metadata = (*live.metadata(), ("authorization", f"Bearer {live.token()}"))
    error = await _refused(live.stub.GetTask(_get(), metadata=metadata))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error_info(error).reason == "DUPLICATE_AUTHORIZATION"


async def test_the_tenant_field_must_match_the_token_and_be_known(live: GrpcEdge):
    mismatch = await _refused(live.stub.GetTask(_get(tenant="demo"), metadata=live.metadata()))
    assert mismatch.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error_info(mismatch).reason == "TENANT_MISMATCH"
    assert "token authorizes tenant 'open', but the request addressed 'demo'" in (
        mismatch.details()
    )
    missing = await _refused(live.stub.GetTask(_get(tenant=""), metadata=live.metadata()))
    assert missing.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(missing).reason == "INVALID_PARAMS"
    assert "tenant is required" in missing.details()
    unknown = await _refused(
        live.stub.GetTask(_get(tenant="ghost"), metadata=live.metadata(tenant="ghost"))
    )
    assert unknown.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown tenant 'ghost'" in unknown.details()


async def test_the_version_metadata_is_required(live: GrpcEdge):
    error = await _refused(live.stub.GetTask(_get(), metadata=live.metadata(version=None)))
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    info = error_info(error)
    assert info.reason == "VERSION_NOT_SUPPORTED"
    assert info.metadata["supportedVersions"] == "1.0"


async def test_another_callers_task_is_not_found_on_every_method(live: GrpcEdge):
    request = json_format.ParseDict(
        {
            "tenant": "open",
            "message": text_message("mine-1", "sleep 30"),
            "configuration": {"returnImmediately": True},
        },
        a2a_pb2.SendMessageRequest(),
    )
    task_id = (await live.stub.SendMessage(request, metadata=live.metadata())).task.id
    other = live.metadata(identity=OTHER)
    calls = [
        live.stub.GetTask(_get(task_id), metadata=other),
        live.stub.CancelTask(a2a_pb2.CancelTaskRequest(tenant="open", id=task_id), metadata=other),
        live.stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(tenant="open", task_id=task_id),
            metadata=other,
        ),
        live.stub.GetTask(_get("no-such-task"), metadata=live.metadata()),
    ]
    errors = [await _refused(call) for call in calls]
    assert {e.code() for e in errors} == {grpc.StatusCode.NOT_FOUND}
    # Indistinguishable from a missing task: the same reason.
    assert {error_info(e).reason for e in errors} == {"TASK_NOT_FOUND"}
    listed = await live.stub.ListTasks(a2a_pb2.ListTasksRequest(tenant="open"), metadata=other)
    assert not listed.tasks
    await live.stub.CancelTask(
        a2a_pb2.CancelTaskRequest(tenant="open", id=task_id), metadata=live.metadata()
    )


async def test_bytes_that_are_not_the_request_are_invalid_argument(live: GrpcEdge):
    raw = live.channel.unary_unary(METHOD + "GetTask")  # no serializers: bytes as given
    error = await _refused(raw(b"\xff\xff\xff\xff", metadata=live.metadata()))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(error).reason == "INVALID_REQUEST"
    assert error.details() == "the request is not a valid GetTaskRequest"


async def test_params_the_handlers_refuse_are_invalid_argument(live: GrpcEdge):
    no_message_id = json_format.ParseDict(
        {"tenant": "open", "message": {"role": "ROLE_USER", "parts": [{"text": "hi"}]}},
        a2a_pb2.SendMessageRequest(),
    )
    error = await _refused(live.stub.SendMessage(no_message_id, metadata=live.metadata()))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(error).reason == "INVALID_PARAMS"
    nul = json_format.ParseDict(
        {"tenant": "open", "message": text_message("nul-1", "a\u0000b")},
        a2a_pb2.SendMessageRequest(),
    )
    error = await _refused(live.stub.SendMessage(nul, metadata=live.metadata()))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "request.message.parts[0].text" in error.details()
    bad_state = a2a_pb2.ListTasksRequest(tenant="open", status=99)
    error = await _refused(live.stub.ListTasks(bad_state, metadata=live.metadata()))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_message_past_the_body_bound_is_resource_exhausted(live: GrpcEdge):
    bound = live.edge.settings.max_body_bytes
    big = json_format.ParseDict(
        {"tenant": "open", "message": text_message("big-1", "x" * (bound + 1))},
        a2a_pb2.SendMessageRequest(),
    )
    error = await _refused(live.stub.SendMessage(big, metadata=live.metadata()))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_an_unknown_method_is_unimplemented(live: GrpcEdge):
    raw = live.channel.unary_unary(METHOD + "message/send")
    error = await _refused(raw(b"", metadata=live.metadata()))
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_an_internal_fault_is_internal_without_its_text(live: GrpcEdge, monkeypatch):
    async def database_down(tenant_id: str) -> None:
        raise RuntimeError("connection to 10.0.0.5 refused, password=hunter2")

    monkeypatch.setattr(live.edge.services.tenants, "get", database_down)
    error = await _refused(live.stub.GetTask(_get(), metadata=live.metadata()))
    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == "internal error"
    assert error_info(error).reason == "INTERNAL_ERROR"
    assert "hunter2" not in str(error.trailing_metadata())
