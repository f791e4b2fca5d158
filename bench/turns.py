"""The turn driver of benchmarks 4 and 6: identities send ``SendMessage`` turns (fresh token
each) and wait for each turn's terminal push at the bench's receiver.

The driver is the load generator and shares the two cores with the edge, its worker and
PostgreSQL, so it must cost little per turn: each identity keeps its own HTTP/1.1 keep-alive
connection written with asyncio streams (as ``bench.pyload`` does). With httpx the driver
took more CPU per turn than the worker and bounded the benchmark.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bench import wire
from bench.config import TENANT
from bench.gateway import BenchGateway
from bench.receiver import PushReceiver


@dataclass
class TurnStats:
    accepted: int = 0
    completed: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)  # accept answer -> terminal push, s
    first_send: float = 0.0
    last_push: float = 0.0

    @property
    def seconds(self) -> float:
        return max(self.last_push - self.first_send, 1e-9)


class TurnDriver:
    def __init__(self, url: str, gateway: BenchGateway, receiver: PushReceiver, audience: str):
        self._gateway = gateway
        self._receiver = receiver
        self._audience = audience
        parts = urlsplit(url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._path = parts.path or "/"
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._n = 0

    async def aclose(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()

    async def _post(self, body: str, token: str) -> bytes:
        """One POST on a pooled keep-alive connection; the answer's body (any status)."""
        data = body.encode()
        request = (
            f"POST {self._path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            f"Authorization: Bearer {token}\r\nA2A-Version: 1.0\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode() + data
        for fresh in (False, True):
            if self._idle and not fresh:
                reader, writer = self._idle.pop()
            else:
                reader, writer = await asyncio.open_connection(self._host, self._port)
            try:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):
                # A keep-alive connection the server closed while idle (uvicorn's 5 s keep-alive
                # timeout; turns wait for pushes): resend on a new one. SendMessage is
                # idempotent on the messageId, so a resend never starts a second turn.
                writer.close()
                if fresh:
                    raise
                continue
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:].strip())
            answer = await reader.readexactly(length)
            self._idle.append((reader, writer))
            return answer
        raise AssertionError("unreachable")

    async def turn(self, identity: str, stats: TurnStats, push_timeout: float = 30.0) -> None:
        self._n += 1
        token = self._gateway.mint(audience=self._audience, tenant=TENANT, identity=identity)
        body = wire.send_message(
            TENANT, self._receiver.url, unique=f"{identity}-{self._n}-{time.time_ns()}"
        )
        sent = time.time()
        if not stats.first_send:
            stats.first_send = sent
        answer = await self._post(body, token)
        accepted_at = time.time()
        doc = json.loads(answer)
        task_id = doc.get("result", {}).get("task", {}).get("id")
        if not task_id:
            stats.failed += 1
            raise RuntimeError(f"SendMessage failed: {str(doc)[:300]}")
        stats.accepted += 1
        try:
            pushed_at = await asyncio.wait_for(self._receiver.wait_terminal(task_id), push_timeout)
        except TimeoutError:
            self._receiver.forget(task_id)
            stats.failed += 1
            return
        stats.completed += 1
        stats.latencies.append(pushed_at - accepted_at)
        stats.last_push = max(stats.last_push, pushed_at)

    async def loop_for(self, identities: list[str], seconds: float) -> TurnStats:
        """Each identity sends a turn, waits for its push, repeats, until ``seconds`` pass."""
        stats = TurnStats()
        stop_at = time.monotonic() + seconds

        async def identity_loop(identity: str) -> None:
            while time.monotonic() < stop_at:
                await self.turn(identity, stats)

        await asyncio.gather(*(identity_loop(i) for i in identities))
        return stats

    async def each_once(
        self,
        identities: list[str],
        concurrency: int,
        on_progress: Callable[[int], None] | None = None,
    ) -> TurnStats:
        """Every identity runs exactly one turn, ``concurrency`` at a time."""
        stats = TurnStats()
        gate = asyncio.Semaphore(concurrency)
        done = 0

        async def one(identity: str) -> None:
            nonlocal done
            async with gate:
                await self.turn(identity, stats)
            done += 1
            if on_progress is not None:
                on_progress(done)

        await asyncio.gather(*(one(i) for i in identities))
        return stats

    async def warm_up(self, identities: list[str]) -> None:
        """One turn per identity; fail fast when no push arrives at all (delivery broken)."""
        stats = await self.each_once(identities, concurrency=len(identities))
        if stats.completed == 0:
            raise RuntimeError(
                f"no terminal push arrived for any of {stats.accepted} accepted warm-up turns "
                "within 30 s: turns or push delivery are not running"
            )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]
