"""Two edges as real processes on PostgreSQL (issue 51, "Done when"): per edge a
``looping-edge serve --no-worker`` and a ``looping-edge worker``, its own database and key,
each listing the other in ``PEER_ORIGINS``; the gateway's JWKS served by the test."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.security.keys import generate_private_jwk
from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks
from tests.e2e.processes import Process, edge_env, free_port, process, wait_ready


@dataclass
class EdgeProcesses:
    name: str
    url: str
    env: dict[str, str]
    log_dir: Path
    stack: AsyncExitStack
    serve: Process | None = None
    workers: list[Process] = field(default_factory=list)

    def start_worker(self) -> Process:
        index = len(self.workers)
        child = self.stack.enter_context(
            process(f"{self.name}-worker-{index}", ["worker"], self.env, self.log_dir)
        )
        self.workers.append(child)
        return child


@dataclass
class TwoEdges:
    kit: GatewayKit
    a: EdgeProcesses
    b: EdgeProcesses

    async def send(self, message: dict[str, Any], tenant: str = "buyer") -> dict[str, Any]:
        """The gateway's SendMessage to A (blocking)."""
        endpoint = self.a.url + "/a2a"
        headers = {**self.kit.bearer(audience=endpoint, tenant=tenant), "A2A-Version": "1.0"}
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"tenant": tenant, "message": message},
        }
        async with httpx.AsyncClient(trust_env=False, timeout=120) as client:
            doc = (await client.post(endpoint, json=body, headers=headers)).json()
        assert "result" in doc, doc
        return dict(doc["result"].get("task", doc["result"]))


@asynccontextmanager
async def two_edge_processes(
    url_a: str,
    url_b: str,
    log_dir: Path,
    *,
    kit: GatewayKit | None = None,
    env_a: Mapping[str, str] | None = None,
    public_url_b: str | None = None,
    **knobs: object,
) -> AsyncIterator[TwoEdges]:
    """``kit``: a gateway whose JWKS the caller already serves (a ``push_receiver(kit=...)``
    is a whole gateway: its pushes then verify too); ``env_a``: more environment for A's
    processes (the variable a ``bearer_env`` directory entry names, say); ``public_url_b``:
    B's ``PUBLIC_URL`` when a proxy in front of it is what callers reach (``b.url`` stays
    where B listens)."""
    port_a, port_b = free_port(), free_port()
    base_a, base_b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
    async with AsyncExitStack() as stack:
        if kit is None:
            kit = GatewayKit()
            await stack.enter_async_context(serve_jwks(kit))
        edges = []
        for name, url, port, peer in (("a", url_a, port_a, base_b), ("b", url_b, port_b, base_a)):
            env = edge_env(
                url,
                port=port,
                signing_jwk=generate_private_jwk(f"edge-{name}"),
                origins=[kit.origin],
                **knobs,
            )
            env["PEER_ORIGINS"] = json.dumps([peer])
            if name == "a":
                env.update(env_a or {})
            elif public_url_b is not None:
                env["PUBLIC_URL"] = public_url_b
            edge = EdgeProcesses(name, f"http://127.0.0.1:{port}", env, log_dir, stack)
            argv = ["serve", "--port", str(port), "--no-worker", "--no-push"]
            edge.serve = stack.enter_context(process(f"{name}-serve", argv, env, log_dir))
            edges.append(edge)
        for edge in edges:
            assert edge.serve is not None
            await wait_ready(edge.url, edge.serve, within=120)
            edge.start_worker()
        yield TwoEdges(kit, edges[0], edges[1])
