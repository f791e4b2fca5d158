"""A reverse proxy in front of an edge that holds its ``SendMessage`` answers: the edge has
accepted the message (it is durable there), but the caller does not learn the task id until
the test releases it. With the edge's ``PUBLIC_URL`` set to the proxy, the edge's cards, JWKS
and token audience all name the proxy, so a caller sees one ordinary peer."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.polling import poll_until

_HOP = frozenset({"host", "content-length", "transfer-encoding", "connection"})


@dataclass
class HoldingProxy:
    base_url: str
    target: str = ""  # the edge's own listening URL, set once it is known
    held: int = 0  # SendMessage answers held so far
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def forward(self, request: Request) -> Response:
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        url = self.target + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
            answer = await client.request(request.method, url, content=body, headers=headers)
        if request.method == "POST" and _method(body) == "SendMessage":
            self.held += 1
            await self.release.wait()
        out = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        out.pop("content-encoding", None)
        return Response(answer.content, status_code=answer.status_code, headers=out)


def _method(body: bytes) -> object:
    try:
        doc = json.loads(body or b"{}")
    except ValueError:
        return None
    return doc.get("method") if isinstance(doc, dict) else None


@asynccontextmanager
async def holding_proxy() -> AsyncIterator[HoldingProxy]:
    """The proxy on a loopback port, served by the test's own event loop."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    proxy = HoldingProxy(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    app = Starlette(routes=[Route("/{path:path}", proxy.forward, methods=methods)])
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await poll_until(lambda: server.started, 10, interval=0.02, what="proxy started")
    try:
        yield proxy
    finally:
        proxy.release.set()
        server.should_exit = True
        await task
        sock.close()
