"""The gRPC side of the TCK's proxy (app.testing.tck_grpc_proxy), offline: a real gRPC server
stands for the edge and records what reaches it; the TCK's side is the a2a-sdk's stub."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.rpc import error_details_pb2, status_pb2

from app.testing.gateway import DEFAULT_TENANT_CLAIM, GatewayKit
from app.testing.tck_grpc_proxy import a2a_methods, caller_metadata, grpc_passthrough, with_tenant
from app.testing.tck_proxy import ProxyConfig, TckProxy
from tests.testing.test_gateway_kit import decode

SERVICE = "/lf.a2a.v1.A2AService/"


class FakeEdge(grpc.GenericRpcHandler):
    """Answers SendMessage with the tenant it got, GetTask with NOT_FOUND and its ErrorInfo,
    and SendStreamingMessage with two events; records each call's metadata."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []

    def service(self, details: Any) -> Any:
        name = details.method.removeprefix(SERVICE)
        if name == "SendMessage":
            return grpc.unary_unary_rpc_method_handler(
                self.send, a2a_pb2.SendMessageRequest.FromString,
                a2a_pb2.SendMessageResponse.SerializeToString,
            )  # fmt: skip
        if name == "GetTask":
            return grpc.unary_unary_rpc_method_handler(
                self.get, a2a_pb2.GetTaskRequest.FromString, a2a_pb2.Task.SerializeToString
            )
        if name == "SendStreamingMessage":
            return grpc.unary_stream_rpc_method_handler(
                self.stream, a2a_pb2.SendMessageRequest.FromString,
                a2a_pb2.StreamResponse.SerializeToString,
            )  # fmt: skip
        return None

    def _seen(self, context: Any) -> None:
        self.metadata.append(dict(context.invocation_metadata()))

    async def send(self, request: Any, context: Any) -> Any:
        self._seen(context)
        return a2a_pb2.SendMessageResponse(task=a2a_pb2.Task(id=request.tenant))

    async def get(self, request: Any, context: Any) -> Any:
        self._seen(context)
        info = error_details_pb2.ErrorInfo(reason="TASK_NOT_FOUND", domain="a2a-protocol.org")
        status = status_pb2.Status(code=grpc.StatusCode.NOT_FOUND.value[0], message="no task")
        status.details.add().Pack(info)
        await context.abort(
            grpc.StatusCode.NOT_FOUND,
            "no task",
            (("grpc-status-details-bin", status.SerializeToString()),),
        )

    async def stream(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self._seen(context)
        for state in (a2a_pb2.TASK_STATE_WORKING, a2a_pb2.TASK_STATE_COMPLETED):
            event = a2a_pb2.TaskStatusUpdateEvent(task_id=request.tenant)
            event.status.state = state
            yield a2a_pb2.StreamResponse(status_update=event)


@pytest.fixture
async def wired() -> AsyncIterator[tuple[a2a_pb2_grpc.A2AServiceStub, FakeEdge, GatewayKit]]:
    edge = FakeEdge()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((edge,))
    edge_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    card = {
        "supportedInterfaces": [
            {"url": "http://edge.test/a2a", "protocolBinding": "JSONRPC"},
            {"url": f"127.0.0.1:{edge_port}", "protocolBinding": "GRPC"},
        ]
    }
    http = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda _: httpx.Response(200, json=card))
    )
    kit = GatewayKit(origin="http://proxy.test")
    proxy = TckProxy(ProxyConfig("http://edge.test", "tck", kit.origin), kit, http)
    try:
        async with (
            grpc_passthrough(proxy, "127.0.0.1", 0) as port,
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            yield a2a_pb2_grpc.A2AServiceStub(channel), edge, kit
    finally:
        await server.stop(grace=None)
        await http.aclose()


async def test_a_call_carries_the_tenant_and_a_token_for_the_grpc_interface(wired):
    stub, edge, _ = wired
    message = a2a_pb2.Message(message_id="m-1", role=a2a_pb2.ROLE_USER)
    answer = await stub.SendMessage(
        a2a_pb2.SendMessageRequest(message=message), metadata=(("a2a-version", "1.0"),)
    )
    assert answer.task.id == "tck"
    seen = edge.metadata[-1]
    assert seen["a2a-version"] == "1.0"
    _, claims = decode(seen["authorization"].removeprefix("Bearer "))
    assert claims["aud"].startswith("127.0.0.1:") and claims[DEFAULT_TENANT_CLAIM] == "tck"


async def test_a_tenant_the_caller_set_is_kept(wired):
    stub, _, _ = wired
    answer = await stub.SendMessage(a2a_pb2.SendMessageRequest(tenant="other"))
    assert answer.task.id == "other"


async def test_an_error_comes_back_with_its_status_details(wired):
    stub, _, _ = wired
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.GetTask(a2a_pb2.GetTaskRequest(id="nope"))
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    details = dict(raised.value.trailing_metadata())["grpc-status-details-bin"]
    info = error_details_pb2.ErrorInfo()
    status_pb2.Status.FromString(details).details[0].Unpack(info)
    assert info.reason == "TASK_NOT_FOUND"


async def test_a_stream_is_relayed_event_by_event(wired):
    stub, _, _ = wired
    events = [e async for e in stub.SendStreamingMessage(a2a_pb2.SendMessageRequest())]
    assert [e.status_update.task_id for e in events] == ["tck", "tck"]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_a_method_the_edge_lacks_is_its_own_unimplemented(wired):
    stub, _, _ = wired
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.CancelTask(a2a_pb2.CancelTaskRequest(id="x"))
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_the_tenant_is_set_only_on_a_request_that_parses_and_has_none():
    send = a2a_methods()[SERVICE + "SendMessage"]
    raw = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(message_id="m")).SerializeToString()
    assert a2a_pb2.SendMessageRequest.FromString(with_tenant(raw, send, "t")).tenant == "t"
    assert with_tenant(b"\xff\xff", send, "t") == b"\xff\xff"
    assert with_tenant(raw, None, "t") == raw
    kept = a2a_pb2.SendMessageRequest(tenant="x").SerializeToString()
    assert with_tenant(kept, send, "t") == kept


def test_only_the_callers_own_metadata_is_forwarded():
    given = [("a2a-version", "1.0"), ("authorization", "x"), ("user-agent", "u"), ("grpc-x", "y")]
    assert caller_metadata(given) == [("a2a-version", "1.0")]
