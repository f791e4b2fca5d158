"""Two edges as real processes for the A2A tools' end-to-end tests (issue 54, "Done when"):
A's ``llm`` agent ``asker`` (its model the fake server ``fake_a``) has a directory naming B's
``helper`` (an ``llm`` agent on ``fake_b``, reached with an edge token) and, when given, an
a2a-sdk agent that requires a bearer token (``bearer_env``). A's gateway is a push receiver
that also serves the gateway's JWKS, so every push to it is verified as the gateway does.
Both edges run ``serve --no-worker --no-push`` and one ``worker`` each, on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from app.db.engine import Database
from app.db.models import TaskMessageRow, TaskRow
from app.security.keys import SigningKey
from app.tenants.registry import TenantRecord
from app.testing.edge import demo_manifest
from app.testing.fake_model import FakeModelServer, Step, dynamic, text
from app.testing.gateway import GatewayKit
from app.testing.push_receiver import CallbackExpectation, PushReceiver, ReceivedPush, push_receiver
from app.testing.sdk_peer import SdkPeer
from app.testing.tenants import add_tenant_at, open_tenant
from tests.negotiation.processes import TwoEdges, two_edge_processes

ASKER = "asker"  # A's tenant (profile gateway: its turns come with a push config)
HELPER = "helper"  # B's tenant (profile open: it takes peer tokens)
ASKER_NAME = "Asker desk"  # A's card name: the name B's model sees for the peer
SDK_TOKEN_ENV = "PEER_SDK_TOKEN"  # the name of the variable of A holding the sdk token


@dataclass
class PeerWorld:
    edges: TwoEdges
    rx: PushReceiver
    fake_a: FakeModelServer
    fake_b: FakeModelServer
    url_a: str
    url_b: str
    sdk: SdkPeer | None

    @property
    def a(self) -> Any:
        return self.edges.a

    @property
    def b(self) -> Any:
        return self.edges.b

    async def ask(self, text: str, message_id: str = "m1") -> str:
        """The gateway's turn to A's agent, pushes to the receiver; the task id."""
        url, token = self.rx.endpoint(f"cfg-{message_id}")
        endpoint = self.a.url + "/a2a"
        headers = {**self.edges.kit.bearer(audience=endpoint, tenant=ASKER), "A2A-Version": "1.0"}
        message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
        params = {
            "tenant": ASKER,
            "message": message,
            "configuration": {"taskPushNotificationConfig": {"url": url, "token": token}},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
            doc = (await client.post(endpoint, json=body, headers=headers)).json()
        assert "result" in doc, doc
        return str(doc["result"]["task"]["id"])

    async def final(self, task_id: str, *, within: float = 90.0) -> ReceivedPush:
        """A's final push for ``task_id``, verified (signature, pinned key, audience, token)."""
        push = await self.rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=within)
        assert push.error is None and push.claims is not None, push
        assert all(p.error is None for p in self.rx.requests), [p.error for p in self.rx.requests]
        return push

    async def helper_tasks(self) -> list[tuple[TaskRow, list[dict[str, Any]]]]:
        """B's tasks of ``helper`` with the user messages each received, oldest first."""
        return await tasks_with_messages(self.url_b, HELPER)


async def tasks_with_messages(url: str, tenant: str) -> list[tuple[TaskRow, list[dict[str, Any]]]]:
    db = Database(url)
    try:
        async with db.transaction() as session:
            query = select(TaskRow).where(TaskRow.tenant == tenant).order_by(TaskRow.created_at)
            tasks = list((await session.execute(query)).scalars())
            out = []
            for task in tasks:
                rows = await session.execute(
                    select(TaskMessageRow)
                    .where(TaskMessageRow.tenant == tenant, TaskMessageRow.task_id == task.id)
                    .order_by(TaskMessageRow.seq)
                )
                users = [r.message for r in rows.scalars() if r.role == "ROLE_USER"]
                out.append((task, users))
            return out
    finally:
        await db.dispose()


def llm_config(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": {"base_url": base_url, "name": "fake"},
        "system_prompt": "You answer with the help of other agents.",
        **extra,
    }


def directory(b_url: str, sdk: SdkPeer | None) -> dict[str, Any]:
    agents: dict[str, Any] = {"helper": {"url": b_url, "tenant": HELPER, "auth": "edge-token"}}
    if sdk is not None:
        agents["sdk"] = {"url": sdk.base_url, "auth": {"bearer_env": SDK_TOKEN_ENV}}
    return {"allow_http_loopback": True, "agents": agents}


@asynccontextmanager
async def peer_world(
    url_a: str,
    url_b: str,
    log_dir: Path,
    *,
    sdk: SdkPeer | None = None,
    asker: Mapping[str, Any] | None = None,
    b_public: str | None = None,
    **knobs: object,
) -> AsyncIterator[PeerWorld]:
    """``asker``: more of A's agent config (``max_tool_output_bytes``, say); ``b_public``: B's
    public URL when A reaches B through a proxy (``tests.peers.proxy``); ``knobs``: edge
    settings of both edges' processes (``lease_seconds=2``)."""
    kit = GatewayKit()
    env_a = {SDK_TOKEN_ENV: sdk.token} if sdk is not None else {}
    async with AsyncExitStack() as stack:
        fake_a = stack.enter_context(FakeModelServer())
        fake_b = stack.enter_context(FakeModelServer())
        rx = await stack.enter_async_context(push_receiver(kit=kit))
        edges = await stack.enter_async_context(
            two_edge_processes(
                url_a, url_b, log_dir, kit=kit, env_a=env_a, public_url_b=b_public, **knobs
            )
        )
        key = SigningKey.from_jwk_json(edges.a.env["A2A_SIGNING_KEY"])
        rx.expect = CallbackExpectation.for_key(key, edges.a.url + "/.well-known/jwks.json")
        config = {**directory(b_public or edges.b.url, sdk), **(asker or {})}
        await add_tenant_at(url_a, _asker(fake_a.base_url, config))
        helper = open_tenant(HELPER, agent="llm", agent_config=llm_config(fake_b.base_url))
        await add_tenant_at(url_b, helper)
        yield PeerWorld(edges, rx, fake_a, fake_b, url_a, url_b, sdk)


def _asker(model_url: str, agents: Mapping[str, Any]) -> TenantRecord:
    return TenantRecord(
        id=ASKER,
        manifest=demo_manifest(ASKER_NAME),
        agent_kind="llm",
        agent_config=llm_config(model_url, **agents),
    )


def tool_results(fake: FakeModelServer) -> list[str]:
    """Every tool result the model was shown, in order (the last request holds them all)."""
    if not fake.requests:
        return []
    return [
        str(m.get("content"))
        for m in fake.requests[-1].messages
        if isinstance(m, Mapping) and m.get("role") == "tool"
    ]


def tool_doc(content: str) -> dict[str, Any]:
    """An A2A tool's result as the model got it: a framing line, then one JSON document."""
    frame, _, doc = content.partition("\n")
    assert frame.startswith("Remote data from A2A agent"), content[:300]
    parsed = json.loads(doc)
    assert isinstance(parsed, dict)
    return parsed


def relay(prefix: str) -> Step:
    """A's model's last step: its reply quotes the peer's answer from the last tool result."""

    def compute(body: dict[str, Any]) -> Step:
        results = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
        doc = tool_doc(str(results[-1]["content"]))
        return text(f"{prefix}{doc.get('text') or doc.get('error')}")

    return dynamic(compute)
