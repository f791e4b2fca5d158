"""A stream opened on one edge process shows every event of a turn run by a worker of another
process, in order (issue 49), over real HTTP on PostgreSQL: ``looping-edge serve --no-worker``
(A) answers the stream, ``looping-edge worker`` (B) runs the turn; nothing but the database
connects them. The official a2a-sdk client streams from A too; and a stream outlives the
worker that dies mid-turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from app.db.engine import Database
from app.security.keys import generate_private_jwk
from app.tenants.registry import TenantRecord, TenantStore
from app.testing.edge import demo_manifest
from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks
from tests.e2e.processes import edge_env, free_port, process, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

SCRIPT = (
    "progress one\nsleep 0.3\nprogress two\nartifact text A\nsleep 0.2\n"
    "progress three\nartifact text B\nreply done"
)


async def _sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line[len("data: ") :])


def _describe(result: dict[str, Any]) -> str:
    if "task" in result:
        return f"task:{result['task']['status']['state']}"
    if "artifactUpdate" in result:
        return f"artifact:{result['artifactUpdate']['artifact']['parts'][0]['text']}"
    status = result["statusUpdate"]["status"]
    text = status.get("message", {}).get("parts", [{}])[0].get("text")
    return f"status:{status['state']}:{text}"


async def test_a_stream_on_one_process_shows_a_turn_run_by_another(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    await TenantStore(pg_database).add(
        TenantRecord(
            id="open",
            manifest=demo_manifest(),
            agent_kind="scripted",
            require_push_config=False,
        )
    )
    kit = GatewayKit()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with AsyncExitStack() as stack:
        # The kit's origin is its JWKS server's, known once it listens.
        await stack.enter_async_context(serve_jwks(kit))
        env = edge_env(
            pg_url, port=port, signing_jwk=generate_private_jwk("e2e-edge"), origins=[kit.origin]
        )
        edge = stack.enter_context(
            process(
                "serve", ["serve", "--port", str(port), "--no-worker", "--no-push"], env, tmp_path
            )
        )
        await wait_ready(base, edge)
        worker = stack.enter_context(process("worker", ["worker"], env, tmp_path))
        headers = {**kit.bearer(audience=base + "/a2a", tenant="open"), "A2A-Version": "1.0"}
        params = {
            "tenant": "open",
            "message": {"messageId": "x-1", "role": "ROLE_USER", "parts": [{"text": SCRIPT}]},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
        seen: list[str] = []
        async with (
            httpx.AsyncClient(trust_env=False, timeout=60) as client,
            client.stream("POST", base + "/a2a", json=body, headers=headers) as response,
        ):
            if response.headers["content-type"] != "text/event-stream":
                raise AssertionError(f"{response.status_code} {(await response.aread())!r}")
            async for event in _sse(response):
                assert event["id"] == 1
                seen.append(_describe(event["result"]))
        edge.check_alive()
        worker.check_alive()
        working = "TASK_STATE_WORKING"
        assert seen[0] == "task:TASK_STATE_SUBMITTED"
        assert [s for s in seen if s.startswith(("status", "artifact")) and "None" not in s] == [
            f"status:{working}:one",
            f"status:{working}:two",
            f"status:{working}:three",
            # The scripted agent attaches its artifacts to the reply: one write, artifacts
            # first, then the final status.
            "artifact:A",
            "artifact:B",
            "status:TASK_STATE_COMPLETED:done",
        ]
        await _sdk_client_streams(base, kit)


async def _sdk_client_streams(base: str, kit: GatewayKit) -> None:
    """The official client, through the real server's SSE."""
    headers = {**kit.bearer(audience=base + "/a2a", tenant="open"), "A2A-Version": "1.0"}
    async with httpx.AsyncClient(trust_env=False, timeout=60, headers=headers) as http:
        client = await create_client(base, ClientConfig(httpx_client=http, streaming=True))
        message = Message(
            message_id="sdk-1", role=Role.ROLE_USER, parts=[Part(text="progress p\nreply ok")]
        )
        events = [
            e async for e in client.send_message(SendMessageRequest(tenant="open", message=message))
        ]
    assert events[0].WhichOneof("payload") == "task"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_stream_outlives_the_worker_that_dies_mid_turn(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    """kill -9 of the worker while a stream on the edge follows its turn: another worker takes
    the turn over once the lease expires, and the same stream shows it to the end."""
    await TenantStore(pg_database).add(
        TenantRecord(
            id="open", manifest=demo_manifest(), agent_kind="scripted", require_push_config=False
        )
    )
    kit = GatewayKit()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(serve_jwks(kit))
        env = edge_env(
            pg_url, port=port, signing_jwk=generate_private_jwk("e2e-edge"), origins=[kit.origin]
        )
        argv = ["serve", "--port", str(port), "--no-worker", "--no-push"]
        edge = stack.enter_context(process("serve", argv, env, tmp_path))
        await wait_ready(base, edge)
        doomed = stack.enter_context(process("worker-b", ["worker"], env, tmp_path))
        headers = {**kit.bearer(audience=base + "/a2a", tenant="open"), "A2A-Version": "1.0"}
        script = "progress one\nsleep 4\nprogress two\nreply done"
        params = {
            "tenant": "open",
            "message": {"messageId": "k-1", "role": "ROLE_USER", "parts": [{"text": script}]},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
        seen: list[str] = []
        async with (
            httpx.AsyncClient(trust_env=False, timeout=60) as client,
            client.stream("POST", base + "/a2a", json=body, headers=headers) as response,
        ):
            async for event in _sse(response):
                seen.append(_describe(event["result"]))
                if seen[-1].endswith(":one") and doomed.proc.poll() is None:
                    doomed.kill9()
                    stack.enter_context(process("worker-c", ["worker"], env, tmp_path))
        edge.check_alive()
        assert doomed.proc.returncode == -9
        assert seen[-2:] == ["status:TASK_STATE_WORKING:two", "status:TASK_STATE_COMPLETED:done"]
