"""A real ``looping-edge serve`` process on SQLite for the HTTP tests that need real sockets
(tenant ``demo``, the gateway kit's JWKS served by the test's loop)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.security.keys import generate_private_jwk
from app.tenants.registry import TenantRecord, TenantStore
from app.testing.edge import demo_manifest
from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks
from tests.e2e.processes import Process, edge_env, free_port, process, wait_ready


@dataclass
class Edge:
    port: int
    kit: GatewayKit
    child: Process

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss_bytes(self) -> int:
        status = Path(f"/proc/{self.child.proc.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def token_head(self, content_length: int) -> bytes:
        token = self.kit.mint(audience=self.base + "/a2a", tenant="demo")
        return (
            f"POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"A2A-Version: 1.0\r\nContent-Type: application/json\r\n"
            f"Content-Length: {content_length}\r\n\r\n"
        ).encode()


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, **knobs: object) -> AsyncIterator[Edge]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'edge.db'}"
    upgrade_to_head(url)
    db = Database(url)
    try:
        await TenantStore(db).add(
            TenantRecord(id="demo", manifest=demo_manifest(), agent_kind="echo")
        )
    finally:
        await db.dispose()
    kit = GatewayKit()
    port = free_port()
    async with serve_jwks(kit):
        env = edge_env(
            url, port=port, signing_jwk=generate_private_jwk("e"), origins=[kit.origin], **knobs
        )
        argv = ["serve", "--port", str(port), "--no-worker", "--no-push"]
        with process("serve", argv, env, tmp_path) as child:
            edge = Edge(port, kit, child)
            await wait_ready(edge.base, child)
            yield edge


async def until_closed(reader: asyncio.StreamReader, within: float) -> float | None:
    """Seconds until the server closed (or reset) the connection; ``None`` if it did not."""
    started = time.monotonic()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            with contextlib.suppress(ConnectionError):
                while await reader.read(65536):
                    pass
            return time.monotonic() - started
    return None
