"""Adaptive idle polling (app/ops/idle_poll.py): the loop polls instead of blocking for a
window after activity, the window adapts like the guest halt-polling governor, 0 turns it off."""

from __future__ import annotations

import asyncio
import json
import selectors
import time
from collections.abc import AsyncIterator

import pytest

from app.db.engine import Database
from app.ops.idle_poll import IdlePoller, IdlePollers
from app.ops.metrics import Metrics
from app.testing.edge import EdgeHarness, edge_harness


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """An ``IdlePollObserver`` and ``ActivityHint`` that only counts."""

    def __init__(self) -> None:
        self.ran_out: list[float] = []
        self.expected = 0

    def idle_poll_ran_out(self, wait: str, window_seconds: float) -> None:
        self.ran_out.append(window_seconds)

    def expect(self) -> None:
        self.expected += 1


async def _spin(times: int = 5) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def _run_out(poller: IdlePoller, clock: FakeClock, after: float, *also: FakeClock) -> None:
    """Let the window in progress end ``after`` seconds from now: the loop polls (the thread
    runs, so every clock in ``also``, its CPU clock, moves too)."""
    clock.now += after
    for other in also:
        other.now += after
    await _spin()
    assert not poller.polling


# --- the loop really polls ---------------------------------------------------------------------


class CountingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Records the timeout of every wait of the event loop."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def select(self, timeout: float | None = None):  # type: ignore[no-untyped-def]
        self.timeouts.append(timeout)
        return super().select(timeout)


def _waits_while_sleeping(max_seconds: float, sleep: float) -> list[float | None]:
    """The loop's wait timeouts while a coroutine sleeps ``sleep`` s right after ``expect()``."""
    selector = CountingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    # The wall clock as the CPU clock: never "preempted", so a busy CI machine cannot end
    # the window early (the yield rule has its own test).
    poller = IdlePoller(max_seconds, cpu_clock=time.perf_counter)

    async def main() -> None:
        poller.expect()
        selector.timeouts.clear()
        await asyncio.sleep(sleep)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return selector.timeouts


def test_within_the_window_the_loop_polls_instead_of_blocking() -> None:
    # A 50 ms window and a 20 ms sleep: every wait of the loop is a poll (timeout 0), many
    # of them, none a blocking wait.
    waits = _waits_while_sleeping(0.05, 0.02)
    assert len(waits) > 20
    assert all(timeout == 0 for timeout in waits)


def test_after_the_window_the_loop_blocks_again() -> None:
    # A 5 ms window and a 60 ms sleep: polls first, then the loop blocks for the rest.
    waits = _waits_while_sleeping(0.005, 0.06)
    assert waits[0] == 0
    assert any(timeout is not None and timeout > 0.01 for timeout in waits)


def test_off_the_loop_blocks_at_once() -> None:
    waits = _waits_while_sleeping(0.0, 0.02)
    assert len(waits) <= 3
    assert any(timeout is not None and timeout > 0.01 for timeout in waits)


# --- the window and its adaptation ------------------------------------------------------------


async def test_off_schedules_nothing() -> None:
    poller = IdlePoller(0.0)
    poller.expect()
    assert not poller.enabled
    assert not poller.polling
    assert poller.window_seconds == 0.0


async def test_a_window_runs_out_and_reports_it() -> None:
    clock, seen = FakeClock(), Recorder()
    poller = IdlePoller(200e-6, observer=seen, clock=clock, cpu_clock=clock)
    poller.expect()
    await _spin()
    assert poller.polling  # the clock has not moved: still inside the window
    await _run_out(poller, clock, 250e-6)
    assert seen.ran_out == [pytest.approx(200e-6)]


async def test_activity_during_a_window_extends_it() -> None:
    clock, seen = FakeClock(), Recorder()
    poller = IdlePoller(200e-6, observer=seen, clock=clock, cpu_clock=clock)
    poller.expect()
    clock.now += 150e-6
    poller.expect()  # a response went out 150 µs in: poll another full window from here
    clock.now += 150e-6  # past the first deadline, inside the extended one
    await _spin()
    assert poller.polling
    assert seen.ran_out == []
    await _run_out(poller, clock, 100e-6)
    assert len(seen.ran_out) == 1


def _poller() -> tuple[IdlePoller, FakeClock, FakeClock]:
    wall, cpu = FakeClock(), FakeClock()
    return IdlePoller(200e-6, clock=wall, cpu_clock=cpu), wall, cpu


async def test_sparse_activity_shrinks_the_window_to_nothing() -> None:
    poller, wall, cpu = _poller()
    windows = []
    for _ in range(12):
        poller.expect()
        windows.append(poller.window_seconds)
        await _run_out(poller, wall, 200e-6, cpu)
        wall.now += 1.0  # asleep until the next request a second later: polling could not help
    assert windows[:3] == pytest.approx([200e-6, 100e-6, 50e-6])
    assert windows[-1] == 0.0
    assert windows == sorted(windows, reverse=True)


async def test_a_wake_up_just_after_the_window_grows_it_back() -> None:
    poller, wall, cpu = _poller()
    for _ in range(12):  # shrink to nothing first
        poller.expect()
        await _run_out(poller, wall, poller.window_seconds, cpu)
        wall.now += 1.0
    poller.expect()
    assert poller.window_seconds == 0.0
    windows = []
    for _ in range(4):
        await _run_out(poller, wall, poller.window_seconds, cpu)
        wall.now += 40e-6  # asleep for 40 µs after the window ran out
        poller.expect()
        windows.append(poller.window_seconds)
    # From a quarter of the maximum, doubling while the window and the sleep fit in the
    # maximum; at the maximum any sleep goes past it, which no allowed window catches: halved.
    assert windows == pytest.approx([50e-6, 100e-6, 200e-6, 100e-6])


async def test_a_window_that_ran_out_while_the_loop_was_busy_is_left_as_it_is() -> None:
    poller, wall, cpu = _poller()
    poller.expect()
    await _run_out(poller, wall, 200e-6, cpu)
    wall.now += 1.0
    poller.expect()  # slept a second: halved to 100 µs
    await _run_out(poller, wall, 100e-6, cpu)
    wall.now += 300e-6
    cpu.now += 300e-6  # 300 µs of a request's own CPU, no sleep: no wake-up was missed
    poller.expect()
    assert poller.window_seconds == pytest.approx(100e-6)


async def test_back_to_back_activity_never_lets_the_window_run_out() -> None:
    clock, seen = FakeClock(), Recorder()
    poller = IdlePoller(200e-6, observer=seen, clock=clock, cpu_clock=clock)
    for _ in range(50):  # a request every 120 µs: each expect() lands inside the window
        poller.expect()
        clock.now += 120e-6
        await _spin(1)
    assert poller.polling
    assert seen.ran_out == []
    assert poller.window_seconds == pytest.approx(200e-6)


async def test_polling_yields_when_another_task_takes_the_cpu() -> None:
    wall, cpu, seen = FakeClock(), FakeClock(), Recorder()
    poller = IdlePoller(200e-6, observer=seen, clock=wall, cpu_clock=cpu)
    poller.expect()
    wall.now += 10e-6
    cpu.now += 10e-6  # the thread ran for all of it: still polling
    await _spin(1)
    assert poller.polling
    wall.now += 100e-6  # a quick answer ran on this CPU for 100 µs: go on polling
    await _spin(1)
    assert poller.polling
    wall.now += 600e-6  # 600 µs, the thread ran for none of it: the CPU is contended
    await _spin(1)
    assert not poller.polling
    assert poller.window_seconds == pytest.approx(100e-6)
    assert seen.ran_out == [pytest.approx(100e-6)]
    wall.now += 30e-6
    cpu.now += 30e-6
    poller.expect()  # woken soon after, but the CPU was contended: no growth
    assert poller.window_seconds == pytest.approx(100e-6)


def test_a_window_of_a_closed_loop_does_not_stop_polling_on_the_next() -> None:
    poller = IdlePoller(0.05)

    async def start() -> None:
        poller.expect()

    async def next_loop() -> tuple[bool, bool]:
        poller.expect()  # on a new loop: a window of its own
        during = poller.polling
        await asyncio.sleep(0.07)
        return during, poller.polling

    old = asyncio.new_event_loop()
    old.run_until_complete(start())
    old.close()  # its window's tick never runs again
    new = asyncio.new_event_loop()
    try:
        assert new.run_until_complete(next_loop()) == (True, False)
    finally:
        new.close()


def test_metrics_count_runouts_and_show_the_window_per_wait() -> None:
    metrics = Metrics()
    metrics.idle_poll_ran_out("request", 50e-6)
    metrics.idle_poll_ran_out("request", 25e-6)
    metrics.idle_poll_ran_out("statement", 200e-6)
    text = metrics.render().decode()
    assert 'edge_idle_poll_runouts_total{wait="request"} 2.0' in text
    assert 'edge_idle_poll_window_seconds{wait="request"} 2.5e-05' in text
    assert 'edge_idle_poll_window_seconds{wait="statement"} 0.0002' in text


async def test_each_kind_of_wait_adapts_on_its_own() -> None:
    seen = Recorder()
    pollers = IdlePollers.build(0.05, observer=seen)
    assert (pollers.request.wait, pollers.statement.wait) == ("request", "statement")
    pollers.request.expect()
    assert pollers.request.polling and not pollers.statement.polling
    await asyncio.sleep(0.08)
    assert not pollers.request.polling
    assert IdlePollers.off().request.enabled is False


# --- where the edge calls it -------------------------------------------------------------------


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url, idle_poll_microseconds=5_000) as harness:
        await harness.add_tenant("demo")
        yield harness


def _runouts(edge: EdgeHarness) -> float:
    registry = edge.services.metrics.registry
    value = registry.get_sample_value("edge_idle_poll_runouts_total", {"wait": "request"})
    return value or 0.0


async def test_an_answered_rpc_starts_a_window(edge: EdgeHarness) -> None:
    poller = edge.services.idle_pollers.request
    assert poller.enabled
    await asyncio.sleep(0.02)  # any window the set-up started has ended
    assert not poller.polling
    before = _runouts(edge)
    await edge.result("GetExtendedAgentCard")
    await asyncio.sleep(0.02)  # the response's window (5 ms) ends
    assert not poller.polling
    assert _runouts(edge) == before + 1  # one window, started when the response went out


async def test_the_setting_turns_it_off(db_url: str) -> None:
    async with edge_harness(db_url, idle_poll_microseconds=0) as harness:
        await harness.add_tenant("demo")
        await harness.result("GetExtendedAgentCard")
        for poller in (
            harness.services.idle_pollers.request,
            harness.services.idle_pollers.statement,
        ):
            assert not poller.enabled
            assert not poller.polling


@pytest.mark.postgres
async def test_a_pooled_statement_expects_its_answer(pg_url: str) -> None:
    seen = Recorder()
    db = Database(pg_url, activity=seen)
    try:
        assert db.statement_pool is not None
        assert await db.statement_pool.fetchval("SELECT 1") == 1
        await db.statement_pool.fetch("SELECT 1")
        assert seen.expected == 2
    finally:
        await db.dispose()


def test_polling_costs_nothing_when_idle_for_long() -> None:
    """Idle for longer than the window: the loop sleeps, so the process uses no CPU."""
    loop = asyncio.new_event_loop()
    poller = IdlePoller(0.002)

    async def main() -> float:
        poller.expect()
        await asyncio.sleep(0.01)  # the window runs out
        started = time.process_time()
        await asyncio.sleep(0.2)
        return time.process_time() - started

    try:
        used = loop.run_until_complete(main())
    finally:
        loop.close()
    assert used < 0.05  # a polling loop would have used ~0.2 s of CPU


def test_a_worker_process_does_not_poll() -> None:
    from app.cli.worker import worker_settings
    from app.security.keys import generate_private_jwk
    from app.services import build_services
    from app.settings import load_settings

    settings = load_settings(
        signing_key=json.dumps(generate_private_jwk("k1")),
        gateway_origins=["https://gateway.test"],
        public_url="https://edge.example.com",
        database_url="sqlite+aiosqlite:///:memory:",
    )
    # Explicitly on where serving would poll; the worker turns it off all the same.
    settings = settings.model_copy(update={"idle_poll_microseconds": 200})
    pollers = build_services(worker_settings(settings)).idle_pollers
    assert not pollers.request.enabled
    assert not pollers.statement.enabled


async def test_the_pollers_serve_a_lone_request_only() -> None:
    pollers = IdlePollers.build(0.05)
    pollers.in_flight.count = 2  # two requests in flight: their work will wake the loop
    pollers.statement.expect()
    pollers.request.expect()
    assert not pollers.statement.polling and not pollers.request.polling
    pollers.in_flight.count = 1
    pollers.statement.expect()
    assert pollers.statement.polling
    await asyncio.sleep(0.08)


async def test_the_endpoint_counts_requests_in_flight(edge: EdgeHarness) -> None:
    pollers = edge.services.idle_pollers
    at_response: list[int] = []
    original = pollers.request.expect

    def spy() -> None:
        at_response.append(pollers.in_flight.count)
        original()

    pollers.request.expect = spy  # type: ignore[method-assign]
    await edge.result("GetExtendedAgentCard")
    assert at_response == [0]  # the answered request left the count before the poll
    response = await edge.rpc("GetExtendedAgentCard", token="not-a-token")
    assert response.status_code == 401
    assert pollers.in_flight.count == 0  # a refused request leaves it too
    assert at_response == [0, 0]
