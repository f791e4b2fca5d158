"""Drives the edge's ASGI app for one SSE response as it is sent: events as they come, comment
lines (heartbeats) counted, and a client disconnect on demand."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from app.testing.edge import EdgeHarness


class SseCall:
    def __init__(
        self,
        edge: EdgeHarness,
        method: str,
        params: Mapping[str, Any],
        *,
        rest: tuple[str, str] | None = None,
        token: str | None = None,
        **kw: Any,
    ):
        """A JSON-RPC call of ``method`` with ``params``; with ``rest=(http method, path)`` an
        HTTP+JSON request to ``/{tenant}<path>`` with ``params`` as its body instead.
        ``token``: the caller's (a peer's, say) instead of one from the harness's gateway."""
        tenant = kw.pop("tenant", None) or edge.default_tenant
        http_method, path = "POST", edge.settings.rpc_path
        if rest is None:
            body_params = {"tenant": tenant, **params}
            token = token or edge.token(tenant=body_params["tenant"], **kw)
            doc = {"jsonrpc": "2.0", "id": 7, "method": method, "params": body_params}
        else:
            token = edge.rest_token(tenant=tenant, **kw)
            doc = dict(params)
            http_method, path = rest[0], f"/{tenant}{rest[1]}"
        self._body = json.dumps(doc).encode()
        self.rest = rest is not None
        headers = {**edge.headers(token), "Content-Length": str(len(self._body))}
        self._scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": http_method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 1234),
            "server": ("testserver", 80),
        }
        self._app = edge.app
        self._sent_body = False
        self._gone = asyncio.Event()
        self.messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.heartbeats = 0
        self.ended = False
        self._buffer = b""
        self._task: asyncio.Task[None] | None = None
        self._stall_after: int | None = None
        self._bodies = 0

    async def __aenter__(self) -> SseCall:
        self._task = asyncio.create_task(self._app(self._scope, self._receive, self._send))
        message = await asyncio.wait_for(self.messages.get(), 10)
        assert message["type"] == "http.response.start"
        self.status = message["status"]
        self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._gone.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 10)

    async def _receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            self._bodies += 1
            if self._stall_after is not None and self._bodies > self._stall_after:
                # A client that stopped reading: the server's send waits (as on a full socket
                # buffer) until the client goes away.
                await self._gone.wait()
                return
        await self.messages.put(message)

    @property
    def bodies(self) -> int:
        """Response bodies (SSE writes) sent so far."""
        return self._bodies

    def stall_after(self, bodies: int) -> None:
        """Take ``bodies`` response bodies (counting from the first), then read nothing."""
        self._stall_after = bodies

    async def disconnect(self) -> None:
        self._gone.set()
        assert self._task is not None
        await asyncio.wait_for(self._task, 10)

    async def body(self) -> bytes:
        """The whole body of a non-streamed answer."""
        message = await asyncio.wait_for(self.messages.get(), 10)
        return bytes(message.get("body", b""))

    async def event(self, timeout: float = 10) -> dict[str, Any] | None:
        """The next event's JSON-RPC response, or None at the end of the stream."""
        while True:
            if b"\n\n" in self._buffer:
                block, self._buffer = self._buffer.split(b"\n\n", 1)
                if block.startswith(b":"):
                    self.heartbeats += 1
                    continue
                assert block.startswith(b"data: "), block
                loaded: dict[str, Any] = json.loads(block[len(b"data: ") :])
                return loaded
            if self.ended:
                return None
            message = await asyncio.wait_for(self.messages.get(), timeout)
            self._buffer += message.get("body", b"")
            self.ended = not message.get("more_body", False)

    async def events(self, timeout: float = 10) -> list[dict[str, Any]]:
        """Every remaining event's ``result`` (on HTTP+JSON the event itself), until the
        stream ends."""
        results = []
        while (event := await self.event(timeout)) is not None:
            if self.rest:
                results.append(event)
                continue
            assert "result" in event, event
            results.append(event["result"])
        return results
