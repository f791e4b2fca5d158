"""Worker processes against real PostgreSQL: kill -9, a paused zombie, per-identity exclusion;
and the SQLite single-worker rule. Every wait polls the database with a deadline."""

from __future__ import annotations

import asyncio
import itertools
import signal
import subprocess
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from app.tasks import states
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.gateway import GatewayKit
from tests.polling import poll_until
from tests.worker.helpers import (
    history,
    outbox,
    reached,
    send,
    status_text,
    task_row,
    turns,
)
from tests.worker.processes import (
    CLI,
    LOOPBACK_PUSH_ORIGIN,
    WorkerProcess,
    worker_env,
    worker_process,
)

T = TypeVar("T")

pytestmark = [pytest.mark.slow]


async def until(
    probe: Callable[[], Awaitable[T | None]] | Callable[[], T | None],
    *workers: WorkerProcess,
    timeout: float = 25.0,
) -> T:
    """Poll ``probe`` (sync or async) with a deadline; fail at once if a worker died."""

    def alive() -> None:
        for worker in workers:
            worker.check_alive()

    return await poll_until(probe, timeout, interval=0.1, check=alive)


async def _harness_tenant(edge: EdgeHarness, *, push: bool = False) -> None:
    await edge.add_tenant("demo", agent="scripted", require_push_config=push)


async def _running(edge: EdgeHarness, at_least: int) -> int | None:
    running = [t for t in await turns(edge.services.db) if t.status == states.TURN_RUNNING]
    return len(running) if len(running) >= at_least else None


async def _all_settled(edge: EdgeHarness, task_ids: list[str]) -> bool:
    db = edge.services.db
    for task_id in task_ids:
        if await reached(db, task_id, *states.TERMINAL) is None:
            return False
    return True


@pytest.mark.postgres
async def test_kill_9_mid_turn_every_turn_reaches_one_terminal_state(
    pg_url: str, tmp_path: Path
) -> None:
    async with edge_harness(pg_url) as edge:
        await _harness_tenant(edge)
        db = edge.services.db
        with worker_process(pg_url, tmp_path, "victim") as victim:
            task_ids = []
            for n in range(3):
                for i in range(10):
                    task_ids.append(
                        await send(
                            edge,
                            f"sleep 1\nreply u{i} turn {n}",
                            message_id=f"u{i}-{n}",
                            who=f"u{i}",
                            push_url=None,
                        )
                    )
            await until(lambda: _running(edge, 5), victim)
            victim.signal(signal.SIGKILL)
            victim.proc.wait(timeout=10)
        interrupted = {t.id for t in await turns(db) if t.status == states.TURN_RUNNING}
        assert interrupted
        with worker_process(pg_url, tmp_path, "rescuer") as rescuer:
            await until(lambda: _all_settled(edge, task_ids), rescuer)
        for task_id in task_ids:
            row = await task_row(db, task_id)
            assert row.state == states.COMPLETED, (task_id, row.state)
            agent_replies = [m for m in await history(db, task_id) if m["role"] == "ROLE_AGENT"]
            assert len(agent_replies) == 1  # exactly one outcome, never two
            assert agent_replies[0]["parts"][0]["text"] == status_text(row)
        all_turns = await turns(db)
        assert {t.status for t in all_turns} == {states.TURN_DONE}
        for turn in all_turns:
            # The interrupted runs counted as attempts; every other turn ran once.
            assert turn.attempts == (2 if turn.id in interrupted else 1)


@pytest.mark.postgres
async def test_paused_worker_is_fenced_out_after_takeover(pg_url: str, tmp_path: Path) -> None:
    async with edge_harness(pg_url) as edge:
        await _harness_tenant(edge)
        db = edge.services.db
        with worker_process(pg_url, tmp_path, "zombie") as zombie:
            task_id = await send(
                edge,
                "progress begin {attempt}\nsleep 3\nreply done by attempt {attempt}",
                message_id="m1",
                push_url=None,
            )

            async def begun() -> bool:
                return status_text(await task_row(db, task_id)) == "begin 1"

            await until(begun, zombie)
            zombie.signal(signal.SIGSTOP)
            with worker_process(pg_url, tmp_path, "holder") as holder:
                row = await until(lambda: reached(db, task_id, *states.TERMINAL), holder)
                assert (row.state, status_text(row)) == (states.COMPLETED, "done by attempt 2")
                zombie.signal(signal.SIGCONT)

                # Whichever of its writes came first (a guarded task write, the turn's own
                # status, or the heartbeat), the fence refused it.
                await until(lambda: any("lease_lost" in e for e in zombie.events()), zombie)
                # The zombie woke up, found itself fenced out and changed nothing.
                row = await task_row(db, task_id)
                assert (row.state, status_text(row)) == (states.COMPLETED, "done by attempt 2")
                replies = [m for m in await history(db, task_id) if m["role"] == "ROLE_AGENT"]
                assert [r["parts"][0]["text"] for r in replies] == ["done by attempt 2"]
                (turn,) = await turns(db, task_id)
                assert (turn.status, turn.attempts) == (states.TURN_DONE, 2)


@pytest.mark.postgres
async def test_two_workers_never_overlap_turns_of_one_identity(pg_url: str, tmp_path: Path) -> None:
    kit = GatewayKit()
    origins = [kit.origin, LOOPBACK_PUSH_ORIGIN]
    async with edge_harness(pg_url, gateway=kit, gateway_origins=origins) as edge:
        await _harness_tenant(edge, push=True)
        db = edge.services.db
        with (
            worker_process(pg_url, tmp_path, "a", "--concurrency", "3") as a,
            worker_process(pg_url, tmp_path, "b", "--concurrency", "3") as b,
        ):
            task_ids = []
            for n in range(4):
                for i in range(6):
                    task_ids.append(
                        await send(
                            edge,
                            "progress start\nsleep 0.2\nreply done",
                            message_id=f"u{i}-{n}",
                            who=f"u{i}",
                            push_url=LOOPBACK_PUSH_ORIGIN + "/push",
                        )
                    )
            await until(lambda: _all_settled(edge, task_ids), a, b)
        spans: dict[str, list[tuple[object, object]]] = defaultdict(list)
        for task_id in task_ids:
            row = await task_row(db, task_id)
            assert row.state == states.COMPLETED
            rows = {o.message_key: o.created_at for o in await outbox(db, task_id)}
            # The progress row is written as the agent starts, the final row as it ends.
            spans[row.identity].append((rows["line-1"], rows["final"]))
        assert len(spans) == 6
        for identity, intervals in spans.items():
            intervals.sort()
            for (_, end), (start, _) in itertools.pairwise(intervals):
                assert end <= start, f"turns of {identity} overlapped"


async def test_several_workers_on_sqlite_are_refused(sqlite_url: str, tmp_path: Path) -> None:
    with worker_process(sqlite_url, tmp_path, "first") as first:
        await until(lambda: "worker.started" in first.events(), first)
        second = await asyncio.to_thread(
            subprocess.run,
            [CLI, "worker"],
            env=worker_env(sqlite_url),
            capture_output=True,
            timeout=60,
        )
        assert second.returncode == 78
        assert b"several workers on SQLite are refused" in second.stderr
        assert first.proc.poll() is None  # the first one keeps running


@pytest.mark.postgres
async def test_sigterm_finishes_the_running_turn_and_starts_no_new_one(
    pg_url: str, tmp_path: Path
) -> None:
    async with edge_harness(pg_url) as edge:
        await _harness_tenant(edge)
        db = edge.services.db
        with worker_process(pg_url, tmp_path, "graceful") as worker:
            first = await send(
                edge, "progress begin\nsleep 1.5\nreply first", message_id="m1", push_url=None
            )
            second = await send(edge, "reply second", message_id="m2", push_url=None)

            async def begun() -> bool:
                return status_text(await task_row(db, first)) == "begin"

            await until(begun, worker)
            worker.signal(signal.SIGTERM)
            code = await asyncio.to_thread(worker.proc.wait, 30)
        assert code == 0
        row = await task_row(db, first)
        assert (row.state, status_text(row)) == (states.COMPLETED, "first")
        assert (await task_row(db, second)).state == states.SUBMITTED
        (queued,) = await turns(db, second)
        assert (queued.status, queued.attempts) == (states.TURN_QUEUED, 0)


@pytest.mark.postgres
async def test_listen_notify_wakes_an_idle_worker_before_its_poll(
    pg_url: str, tmp_path: Path
) -> None:
    async with edge_harness(pg_url) as edge:
        await _harness_tenant(edge)
        db = edge.services.db
        # Polling once a minute: only NOTIFY (sent by accept at commit) wakes it within the wait.
        with worker_process(pg_url, tmp_path, "listener", poll_seconds=60) as worker:
            first = await send(edge, "reply one", message_id="m1", push_url=None)
            await until(lambda: reached(db, first, states.COMPLETED), worker)
            second = await send(edge, "reply two", message_id="m2", push_url=None)
            row = await until(lambda: reached(db, second, states.COMPLETED), worker, timeout=30)
            assert status_text(row) == "two"
