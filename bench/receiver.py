"""A push receiver on loopback: a minimal HTTP/1.1 keep-alive server that answers ``200`` and
records when each task's first terminal push arrived (``time.time()``, the same clock the
driver uses for accept times)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
}
_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


def _task_and_state(doc: Any) -> tuple[str | None, str | None]:
    if not isinstance(doc, dict):
        return None, None
    task = doc.get("task")
    if isinstance(task, dict):
        return task.get("id"), (task.get("status") or {}).get("state")
    update = doc.get("statusUpdate")
    if isinstance(update, dict):
        return update.get("taskId"), (update.get("status") or {}).get("state")
    return None, None


class PushReceiver:
    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.pushes = 0
        self._waiters: dict[str, asyncio.Future[float]] = {}
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.origin + "/push"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            # Closing the sockets ends every connection handler (IncompleteReadError).
            for writer in list(self._writers):
                writer.close()
            await asyncio.sleep(0)
            await self._server.wait_closed()
            self._server = None

    def wait_terminal(self, task_id: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        if task_id in self.arrived:
            future.set_result(self.arrived[task_id])
        else:
            self._waiters[task_id] = future
        return future

    def forget(self, task_id: str) -> None:
        self._waiters.pop(task_id, None)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:].strip())
                body = await reader.readexactly(length) if length else b""
                self._record(body)
                writer.write(_OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _record(self, body: bytes) -> None:
        now = time.time()
        self.pushes += 1
        try:
            task_id, state = _task_and_state(json.loads(body))
        except ValueError:
            return
        if task_id is None or state not in TERMINAL or task_id in self.arrived:
            return
        self.arrived[task_id] = now
        waiter = self._waiters.pop(task_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(now)
