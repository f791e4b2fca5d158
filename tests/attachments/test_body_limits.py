"""The larger request body for tenants that opted into attachments (issue 55), on the
HTTP+JSON and gRPC bindings as on JSON-RPC: chosen after the token (and its tenant) is
verified; every other tenant keeps ``EDGE_MAX_BODY_BYTES``, refused in the binding's own
shape; past the largest limit every tenant is refused."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf import json_format

from app.interfaces import GRPC, interface_url
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.pdfs import slow_pdf, text_pdf
from tests.grpc.conftest import error_info, free_port, grpc_server

MiB = 1024 * 1024
IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * (MiB // 256 - 1)  # just under 1 MiB
MODEL = {"model": {"base_url": "http://127.0.0.1:9/v1", "name": "fake"}}


def _parts(images: int, caption: str = "look") -> list[dict[str, Any]]:
    raw = {"raw": base64.b64encode(IMAGE).decode(), "mediaType": "image/png"}
    return [{"text": caption}, *([raw] * images)]


def _message(message_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": parts}


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url, grpc_port=free_port(), background=True) as harness:
        for tenant, attachments in (
            ("pics", {"images": True}),
            ("docs", {"documents": True}),
            ("plain", {}),
        ):
            await harness.add_tenant(
                tenant,
                agent="llm",
                agent_config={**MODEL, "attachments": attachments},
                require_push_config=False,
            )
        yield harness


async def test_rest(edge: EdgeHarness) -> None:
    def send(message_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "message": _message(message_id, parts),
            "configuration": {"returnImmediately": True},
        }

    four = send("m-1", _parts(4))  # four images of just under 1 MiB: a 5 MiB body
    body_bytes = len(json.dumps(four))
    assert 5 * MiB < body_bytes < 6 * MiB
    accepted = await edge.rest("POST", "/message:send", tenant="pics", json=four)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"

    refused = await edge.rest("POST", "/message:send", tenant="plain", json=four)
    assert refused.status_code == 413
    error = refused.json()["error"]
    assert (error["code"], error["status"]) == (413, "RESOURCE_EXHAUSTED")
    tasks = await edge.rest("GET", "/tasks", tenant="plain")
    assert tasks.json().get("tasks", []) == []

    # Past EDGE_MAX_DOCUMENT_BODY_BYTES (the largest limit): refused for every tenant.
    huge = send("m-2", _parts(0, "x" * 13 * MiB))
    for tenant in ("docs", "pics"):
        refused = await edge.rest("POST", "/message:send", tenant=tenant, json=huge)
        assert refused.status_code == 413, tenant

    # The raised limit follows the token's tenant, not the path's: a plain-tenant token
    # aimed at the pics path is refused by size before the tenant rules look at it.
    token = edge.rest_token(tenant="plain")
    response = await edge.rest("POST", "/message:send", tenant="pics", json=four, token=token)
    assert response.status_code == 413


async def test_grpc(edge: EdgeHarness) -> None:
    target = f"127.0.0.1:{grpc_server(edge).port}"

    def metadata(tenant: str) -> tuple[tuple[str, str], ...]:
        token = edge.gateway.mint(
            audience=interface_url(edge.settings, GRPC), tenant=tenant, identity=edge.identity
        )
        return (("authorization", f"Bearer {token}"), ("a2a-version", "1.0"))

    def request(tenant: str, message_id: str, parts: list[dict[str, Any]]) -> Any:
        doc = {
            "tenant": tenant,
            "message": _message(message_id, parts),
            "configuration": {"returnImmediately": True},
        }
        return json_format.ParseDict(doc, a2a_pb2.SendMessageRequest())

    # Four images of just under 1 MiB: a 4 MiB message (bytes, not base64, on gRPC). The
    # rest of a message keeps the default limit (a long caption would be refused).
    five = _parts(4)
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        message = request("pics", "g-1", five)
        assert 3 * MiB < message.ByteSize() < 6 * MiB
        answer = await stub.SendMessage(message, metadata=metadata("pics"))
        assert answer.task.status.state == a2a_pb2.TASK_STATE_SUBMITTED

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(request("plain", "g-2", five), metadata=metadata("plain"))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info(refused.value).reason == "BODY_TOO_LARGE"
        listed = await stub.ListTasks(
            a2a_pb2.ListTasksRequest(tenant="plain"), metadata=metadata("plain")
        )
        assert list(listed.tasks) == []

        # Without a valid token, a large message is refused for the token, not read further.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(request("pics", "g-3", five), metadata=())
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        # Past the largest limit: gRPC's own RESOURCE_EXHAUSTED, for every tenant.
        huge = request("docs", "g-4", _parts(0, "x" * 13 * MiB))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(huge, metadata=metadata("docs"))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_grpc_large_messages_take_a_slot(db_url: str) -> None:
    """A message past the default limit is handled in one of the process's slots, as an
    HTTP body is: with the one slot held (a PDF being read), another large message waits
    and is refused; a small one is served meanwhile."""
    async with edge_harness(
        db_url,
        grpc_port=free_port(),
        background=True,
        max_large_bodies=1,
        large_body_wait_seconds=0,
        pdf_deadline_seconds=2.0,
    ) as edge:
        await edge.add_tenant(
            "docs",
            agent="llm",
            agent_config={**MODEL, "attachments": {"documents": True}},
            require_push_config=False,
        )
        token = edge.gateway.mint(
            audience=interface_url(edge.settings, GRPC), tenant="docs", identity=edge.identity
        )
        metadata = (("authorization", f"Bearer {token}"), ("a2a-version", "1.0"))
        readable = text_pdf(["page"], padding=edge.settings.max_body_bytes)
        large = {"raw": base64.b64encode(readable).decode(), "mediaType": "application/pdf"}

        def request(message_id: str, *parts: dict[str, Any]) -> Any:
            doc = {
                "tenant": "docs",
                "message": _message(message_id, list(parts)),
                "configuration": {"returnImmediately": True},
            }
            return json_format.ParseDict(doc, a2a_pb2.SendMessageRequest())

        # A PDF past the default limit on its own: slow to read, so it holds the one slot.
        slow_bytes = slow_pdf(32, 20_000, padding=edge.settings.max_body_bytes)
        pdf = {"raw": base64.b64encode(slow_bytes).decode(), "mediaType": "application/pdf"}
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_server(edge).port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            slow = asyncio.ensure_future(
                stub.SendMessage(request("s-1", {"text": "read"}, pdf), metadata=metadata)
            )
            await asyncio.sleep(0.5)
            with pytest.raises(grpc.aio.AioRpcError) as busy:
                await stub.SendMessage(request("s-2", large), metadata=metadata)
            assert busy.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert error_info(busy.value).reason == "LARGE_BODIES_BUSY"
            small = await stub.SendMessage(request("s-3", {"text": "hi"}), metadata=metadata)
            assert small.task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
            assert not slow.done()
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await slow
            assert error_info(refused.value).reason == "CONTENT_TYPE_NOT_SUPPORTED"
            # The slot is free again.
            later = await stub.SendMessage(request("s-4", large), metadata=metadata)
            assert later.task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
