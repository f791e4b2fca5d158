"""The runtime's hold on a running agent: cancellation, lost leases, shutdown, the SQLite guard."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from app.agents.contract import AgentReply, AgentResult, TurnContext
from app.agents.registry import default_registry
from app.db.models import ActorRow
from app.db.signals import Wakeup
from app.errors import ConfigError
from app.tasks import states
from app.testing.edge import EdgeHarness, edge_harness
from app.worker.runtime import build_worker
from tests.worker.helpers import actor, eventually, outbox, reached, send, settled_turn, turns


class Recording:
    """A test agent that logs its steps and blocks until released."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    def factory(self, _config: Mapping[str, Any]) -> Recording:
        return self

    async def run(self, ctx: TurnContext) -> AgentResult:
        self.steps.append(f"start {ctx.attempt}")
        await ctx.progress("step-1", "one")
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.steps.append("cancelled")
            raise
        self.steps.append("after")
        await ctx.progress("step-2", "two")
        return AgentReply(text="finished")


@asynccontextmanager
async def worker_with(
    db_url: str, agent: Recording, **overrides: Any
) -> AsyncIterator[EdgeHarness]:
    settings = {"poll_seconds": 0.1, "lease_seconds": 3, **overrides}
    async with edge_harness(db_url, **settings) as edge:
        await edge.add_tenant("demo", agent="recording")
        registry = default_registry()
        registry.register("recording", agent.factory)
        worker = build_worker(edge.services, owner="test-worker", agents=registry)
        assert worker is not None
        await worker.start()
        try:
            yield edge
        finally:
            await worker.stop()


async def test_cancel_stops_the_agent_and_nothing_more_is_queued(db_url: str) -> None:
    agent = Recording()
    async with worker_with(db_url, agent) as edge:
        db = edge.services.db
        task_id = await send(edge, "hi", message_id="m1")
        await asyncio.wait_for(agent.started.wait(), 10)
        await edge.result("CancelTask", {"id": task_id})
        await eventually(lambda: settled_turn(db, task_id, states.TURN_CANCELED))
        assert agent.steps == ["start 1", "cancelled"]
        assert [o.message_key for o in await outbox(db, task_id)] == ["step-1"]
        agent.release.set()  # even if it were still around, it could not go on


async def test_lost_lease_stops_the_agent_and_leaves_the_turn_alone(db_url: str) -> None:
    agent = Recording()
    async with worker_with(db_url, agent, lease_seconds=1.5) as edge:
        db = edge.services.db
        task_id = await send(edge, "hi", message_id="m1")
        await asyncio.wait_for(agent.started.wait(), 10)
        # Another worker took the identity over (the fence moved on).
        async with db.transaction() as s:
            await s.execute(
                update(ActorRow)
                .where(ActorRow.identity == "user-1")
                .values(
                    fence=ActorRow.fence + 1,
                    lease_owner="other",
                    lease_until=datetime.now(UTC) + timedelta(hours=1),
                )
            )

        async def stopped() -> bool:
            return "cancelled" in agent.steps

        await eventually(stopped, timeout=10)
        (turn,) = await turns(db, task_id)
        assert turn.status == states.TURN_RUNNING  # the new holder's to settle, not ours
        assert [o.message_key for o in await outbox(db, task_id)] == ["step-1"]


async def test_shutdown_gives_the_turn_back_without_counting_the_attempt(db_url: str) -> None:
    agent = Recording()
    async with edge_harness(db_url, poll_seconds=0.1) as edge:
        await edge.add_tenant("demo", agent="recording")
        registry = default_registry()
        registry.register("recording", agent.factory)
        worker = build_worker(edge.services, owner="w1", agents=registry)
        assert worker is not None
        worker._grace = 0.1  # type: ignore[attr-defined]
        await worker.start()
        task_id = await send(edge, "hi", message_id="m1")
        await asyncio.wait_for(agent.started.wait(), 10)
        await worker.stop()
        (turn,) = await turns(edge.services.db, task_id)
        assert (turn.status, turn.attempts, turn.last_error) == ("queued", 0, "interrupted")
        # The next worker resumes it at once (the lease was released).
        agent.release.set()
        second = build_worker(edge.services, owner="w2", agents=registry)
        assert second is not None
        await second.start()
        try:
            row = await eventually(lambda: reached(edge.services.db, task_id, states.COMPLETED))
            assert row.status["message"]["parts"] == [{"text": "finished"}]
            assert agent.steps[-2:] == ["start 1", "after"]
        finally:
            await second.stop()


async def test_second_worker_on_one_sqlite_file_is_refused(sqlite_url: str) -> None:
    async with edge_harness(sqlite_url) as edge:
        first = build_worker(edge.services, owner="w1")
        second = build_worker(edge.services, owner="w2")
        assert first is not None and second is not None
        await first.start()
        try:
            with pytest.raises(ConfigError, match="several workers on SQLite are refused"):
                await second.start()
        finally:
            await first.stop()
        # Released on stop: a later worker may start.
        await second.start()
        await second.stop()


async def test_wakeup_coalesces_and_times_out() -> None:
    wakeup = Wakeup()
    wakeup.notify()
    wakeup.notify()
    await asyncio.wait_for(wakeup.wait(5), 1)  # pending notification: returns at once
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(wakeup.wait(5), 0.1)  # consumed: waits
    waiter = asyncio.create_task(wakeup.wait(5))
    await asyncio.sleep(0)
    wakeup.notify()
    await asyncio.wait_for(waiter, 1)
    await wakeup.wait(0.01)  # timeout path


class Hog:
    """Busy for several lease periods, hogging the CPU between short awaits."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def factory(self, _config: Mapping[str, Any]) -> Hog:
        return self

    async def run(self, ctx: TurnContext) -> AgentResult:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.seconds
        while loop.time() < end:
            burst = time.monotonic() + 0.1
            while time.monotonic() < burst:  # CPU-bound, no await
                pass
            await asyncio.sleep(0)
        return AgentReply(text=f"hogged on attempt {ctx.attempt}")


async def test_heartbeat_keeps_the_lease_through_a_long_busy_turn(db_url: str) -> None:
    hog = Hog(seconds=3.5)
    async with edge_harness(db_url, poll_seconds=0.1, lease_seconds=1.2) as edge:
        await edge.add_tenant("demo", agent="hog")
        registry = default_registry()
        registry.register("hog", hog.factory)
        first = build_worker(edge.services, owner="w1", agents=registry)
        rival = build_worker(edge.services, owner="w2", agents=registry)
        assert first is not None and rival is not None
        await first.start()
        task_id = await send(edge, "go", message_id="m1")
        if not edge.services.db.is_sqlite:
            await rival.start()  # a second worker ready to steal an expired lease
        try:
            db = edge.services.db
            row = await eventually(lambda: reached(db, task_id, *states.TERMINAL))
            assert row.status["message"]["parts"] == [{"text": "hogged on attempt 1"}]
            (turn,) = await turns(db, task_id)
            assert turn.attempts == 1
            assert (await actor(db, "user-1")).fence == 1  # never taken over
        finally:
            if not edge.services.db.is_sqlite:
                await rival.stop()
            await first.stop()
