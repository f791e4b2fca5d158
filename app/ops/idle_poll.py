"""Adaptive idle polling: keep the event loop polling for a short window after activity,
instead of letting the process block in ``epoll_wait`` the moment it has nothing to do.

Why: at low concurrency a verified GetTask waits twice, for its one PostgreSQL statement and,
on a keep-alive connection, for the client's next request, each a few tens of µs. A process
that blocks for such a wait puts its vCPU to sleep, and on virtual machines whose idle vCPUs
halt at once (the ``haltpoll`` cpuidle driver with ``guest_halt_poll_ns`` = 0, the host type
of most benchmark rounds) every wake-up is a full halt and resume, and the code after it runs
on cold caches. Measured on such a host (bench/ROUNDS.md, round thirty-four; benchmark 2 serves
the edge with polling off beside it): at concurrency 1 the polled edge answered 1.19-1.29x the
requests (p50 1.24-1.34x shorter) for ~1.13x the CPU per request, and 0.93-1.07x at 16 and 64.

How: ``expect()`` says "activity is likely soon" (a statement was sent, a response went out).
Each kind of wait has its own poller and window (``IdlePollers``): a statement's answer comes
within a round trip nearly always, while the next request after a response comes at the
client's pace, and one shared window was kept oscillating by the two (at a paced 1,800
requests per second it cost 1.48x the CPU per request, bench/ROUNDS.md round thirty-four).
The poller then keeps a callback in the loop's ready queue until the window ends, so the loop
polls its sockets with a zero timeout instead of blocking; any I/O that arrives is handled at
once, and ``expect()`` during a window extends it. When a window runs out the loop blocks as
usual. Nothing runs while the process is idle for longer than one window, and nothing polls
while the process answers more than one request (``IdlePollers``).

The window adapts like the Linux guest halt-polling governor (kernel documentation,
``virt/guest-halt-polling``), the idle time being the window polled plus the sleep after it
(wall time the thread did not run for, so a window that ran out while the loop was busy with
a request's own CPU counts for nothing): when the process was woken within the maximum, a
longer window would have caught the wake-up, so the window doubles (from a quarter of the
maximum, up to the maximum); when it was woken past the maximum, no allowed window would
have, so the window halves. Sparse traffic thus polls for almost nothing, and back-to-back
traffic polls through every wait.

Polling yields: the kernel's idle-loop polling runs only when nothing else wants the CPU, but
a polling process is runnable and competes with every other one (PostgreSQL's backends on the
same two cores, above all). So each tick compares the wall time since the last tick with the
thread's own CPU time; when the thread lost more than 500 µs to another task (longer than
the quick answer it polls for), the CPU is contended and polling stops at once and halves the
window. On a busy machine the window therefore shrinks away and the loop blocks as it would
without polling.

The cost is CPU: a window that runs out was spent polling. ``EDGE_IDLE_POLL_MICROSECONDS``
sets the maximum (0 turns polling off); ``edge_idle_poll_runouts_total`` counts the windows
that ended with nothing arriving (ran out or yielded) and ``edge_idle_poll_window_seconds``
shows the current window (README, "The edge's own idle polling").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# Below this the halved window is zero: a window of a microsecond polls once at most.
_FLOOR_SECONDS = 1e-6
# A window that ran out and was followed by less sleep than this ran out while the loop was
# busy: no wake-up was missed.
_SLEPT_SECONDS = 20e-6
# Between two ticks the thread ran (its CPU clock moved) or it was preempted. A short
# preemption is likely the task that is about to answer (PostgreSQL's backend woken on this
# CPU, the client sending its next request), and polling through it is what saves the
# wake-up; losing the CPU for longer than a whole window means another task has real work.
_PREEMPTED_SECONDS = 500e-6


class ActivityHint(Protocol):
    """What the hot path calls when it expects activity soon (``IdlePoller``)."""

    def expect(self) -> None: ...


class IdlePollObserver(Protocol):
    """Where the poller reports (``app.ops.metrics.Metrics``)."""

    def idle_poll_ran_out(self, wait: str, window_seconds: float) -> None: ...


class IdlePoller:
    """The adaptive polling window of one kind of wait (``wait``) of a process's event loop."""

    def __init__(
        self,
        max_seconds: float,
        *,
        wait: str = "any",
        gate: Callable[[], bool] | None = None,
        observer: IdlePollObserver | None = None,
        clock: Callable[[], float] = time.perf_counter,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self._max = max(max_seconds, 0.0)
        self.wait = wait
        self._gate = gate
        self._grow_start = self._max / 4
        self._window = self._max
        self._observer = observer
        self._clock = clock
        self._cpu_clock = cpu_clock
        self._deadline = 0.0
        # Wall and thread CPU time at the last tick: a wall gap the thread did not run for
        # means another task had the CPU (the module docstring: "Polling yields").
        self._tick_wall = 0.0
        self._tick_cpu = 0.0
        # The loop of the window in progress; None when no window runs.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ran_out_at: float | None = None
        self._ran_out_cpu = 0.0

    @property
    def enabled(self) -> bool:
        return self._max > 0

    @property
    def window_seconds(self) -> float:
        return self._window

    @property
    def polling(self) -> bool:
        return self._loop is not None

    def expect(self) -> None:
        """Activity is likely soon: poll for the current window (from now)."""
        if self._max <= 0 or (self._gate is not None and not self._gate()):
            return
        now = self._clock()
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            # A window is running: the activity came while the loop polled. Extend it.
            self._deadline = max(self._deadline, now + self._window)
            return
        self._adapt(now)
        self._loop = loop
        self._deadline = now + self._window
        self._tick_wall, self._tick_cpu = now, self._cpu_clock()
        loop.call_soon(self._tick)

    def _adapt(self, now: float) -> None:
        """Resize the window after one ran out, by how long the process then slept before
        this activity (the governor's rule, with the polled window plus the sleep as the
        idle time)."""
        if self._ran_out_at is None:
            return
        # Wall time the thread did not run for since the window ran out: a window that ran
        # out while the loop was busy (a request's own CPU) never slept, and says nothing.
        slept = (now - self._ran_out_at) - (self._cpu_clock() - self._ran_out_cpu)
        self._ran_out_at = None
        if slept < _SLEPT_SECONDS:
            return
        if self._window + slept <= self._max:
            # Woken within the maximum: a longer window would have caught it.
            self._window = min(self._max, max(self._grow_start, self._window * 2))
        else:
            # Woken past the maximum: no allowed window would have; poll less.
            self._window = _halved(self._window)

    def _tick(self) -> None:
        loop = self._loop
        if loop is None:
            return
        now, cpu = self._clock(), self._cpu_clock()
        preempted = (now - self._tick_wall) - (cpu - self._tick_cpu) > _PREEMPTED_SECONDS
        self._tick_wall, self._tick_cpu = now, cpu
        if preempted:
            # Another task wanted this CPU: polling would take it from them. Stop, halve
            # the window, and let the next expect() start afresh rather than grow.
            self._window = _halved(self._window)
            self._loop = None
            self._ran_out_at = None
        elif now < self._deadline and not loop.is_closed():
            loop.call_soon(self._tick)
            return
        else:
            self._loop = None
            self._ran_out_at, self._ran_out_cpu = now, cpu
        if self._observer is not None:
            self._observer.idle_poll_ran_out(self.wait, self._window)


def _halved(window: float) -> float:
    half = window / 2
    return half if half >= _FLOOR_SECONDS else 0.0


class InFlight:
    """JSON-RPC requests this process is answering (``app.http.routes.RpcEndpoint``)."""

    def __init__(self) -> None:
        self.count = 0

    def lone(self) -> bool:
        """At most one: the only case the pollers serve (``IdlePollers``)."""
        return self.count <= 1


@dataclass(frozen=True)
class IdlePollers:
    """A process's pollers, one per kind of wait: the next request on a keep-alive connection
    after a response went out (``app.http.routes``), and a pooled statement's answer
    (``app.db.statement_pool``).

    Both poll only while the process answers at most one request: a lone request is where a
    wake-up is most of the wait, while with several in flight the loop has their work coming
    anyway and polling only competes for the CPU with the other processes and PostgreSQL (two
    uvicorn processes at concurrency 16: 0.94-0.95x the requests per second with polling at
    every wait, bench/ROUNDS.md round thirty-four)."""

    request: IdlePoller
    statement: IdlePoller
    in_flight: InFlight

    @classmethod
    def build(cls, max_seconds: float, observer: IdlePollObserver | None = None) -> IdlePollers:
        in_flight = InFlight()
        return cls(
            request=IdlePoller(max_seconds, wait="request", gate=in_flight.lone, observer=observer),
            statement=IdlePoller(
                max_seconds, wait="statement", gate=in_flight.lone, observer=observer
            ),
            in_flight=in_flight,
        )

    @classmethod
    def off(cls) -> IdlePollers:
        return cls.build(0.0)
