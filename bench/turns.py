"""The turn driver of benchmarks 4 and 6: identities send ``SendMessage`` turns (fresh token
each) and wait for each turn's terminal push at the bench's receiver."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

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
        self._url = url
        self._gateway = gateway
        self._receiver = receiver
        self._audience = audience
        self._client = httpx.AsyncClient(
            timeout=60, limits=httpx.Limits(max_connections=128, max_keepalive_connections=128)
        )
        self._n = 0

    async def aclose(self) -> None:
        await self._client.aclose()

    async def turn(self, identity: str, stats: TurnStats, push_timeout: float = 30.0) -> None:
        self._n += 1
        token = self._gateway.mint(audience=self._audience, tenant=TENANT, identity=identity)
        body = wire.send_message(
            TENANT, self._receiver.url, unique=f"{identity}-{self._n}-{time.time_ns()}"
        )
        sent = time.time()
        if not stats.first_send:
            stats.first_send = sent
        headers = {
            "Authorization": f"Bearer {token}",
            "A2A-Version": "1.0",
            "Content-Type": "application/json",
        }
        try:
            response = await self._client.post(self._url, content=body, headers=headers)
        except (httpx.ReadError, httpx.RemoteProtocolError):
            # A keep-alive connection the server closed while idle (uvicorn's 5 s keep-alive
            # timeout; turns wait for pushes): resend. SendMessage is idempotent on the
            # messageId, so a resend never starts a second turn.
            response = await self._client.post(self._url, content=body, headers=headers)
        accepted_at = time.time()
        doc = response.json()
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
