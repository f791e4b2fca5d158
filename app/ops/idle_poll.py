"""Adaptive idle polling: keep the event loop polling for a short window after activity,
instead of letting the process block in ``epoll_wait`` the moment it has nothing to do.

Why: at low concurrency a verified GetTask waits twice, for its one PostgreSQL statement and,
on a keep-alive connection, for the client's next request, each a few tens of µs. A process
that blocks for such a wait puts its vCPU to sleep, and on virtual machines whose idle vCPUs
halt at once (the ``haltpoll`` cpuidle driver with ``guest_halt_poll_ns`` = 0, the host type
of most benchmark rounds) every wake-up is a full halt and resume, and the code after it runs
on cold caches. Measured on such a host (bench/ROUNDS.md, round thirty-four): polling through
those waits took GetTask at concurrency 1 from 2,174 to 2,842 requests per second (1.31x)
with the edge's CPU per request 332 -> 343 µs, and changed nothing at concurrency 16.

How: ``expect()`` says "activity is likely soon" (a statement was sent, a response went out).
The poller then keeps a callback in the loop's ready queue until the window ends, so the loop
polls its sockets with a zero timeout instead of blocking; any I/O that arrives is handled at
once, and ``expect()`` during a window extends it. When a window runs out the loop blocks as
usual. Nothing runs while the process is idle for longer than one window.

The window adapts like the Linux guest halt-polling governor (kernel documentation,
``virt/guest-halt-polling``): when the loop blocked for longer than the window but less than
the maximum, a longer window would have caught the wake-up, so the window doubles (from a
quarter of the maximum, up to the maximum); when it blocked for longer than the maximum,
polling could not have helped, so the window halves. Sparse traffic thus polls for almost
nothing, and back-to-back traffic polls through every wait.

The cost is CPU: a window that runs out was spent polling. ``EDGE_IDLE_POLL_MICROSECONDS``
sets the maximum (0 turns polling off); ``edge_idle_poll_runouts_total`` counts the windows
that ran out and ``edge_idle_poll_window_seconds`` shows the current window (README,
"Latency at low concurrency on virtual machines").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

# Below this the halved window is zero: a window of a microsecond polls once at most.
_FLOOR_SECONDS = 1e-6


class ActivityHint(Protocol):
    """What the hot path calls when it expects activity soon (``IdlePoller``)."""

    def expect(self) -> None: ...


class IdlePollObserver(Protocol):
    """Where the poller reports (``app.ops.metrics.Metrics``)."""

    def idle_poll_ran_out(self, window_seconds: float) -> None: ...


class IdlePoller:
    """One per process: the adaptive polling window of the process's event loop."""

    def __init__(
        self,
        max_seconds: float,
        *,
        observer: IdlePollObserver | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._max = max(max_seconds, 0.0)
        self._grow_start = self._max / 4
        self._window = self._max
        self._observer = observer
        self._clock = clock
        self._deadline = 0.0
        # The loop of the window in progress; None when no window runs.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ran_out_at: float | None = None

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
        if self._max <= 0:
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
        loop.call_soon(self._tick)

    def _adapt(self, now: float) -> None:
        """Resize the window by how long the loop blocked after the last one ran out."""
        if self._ran_out_at is None:
            return
        blocked = now - self._ran_out_at
        self._ran_out_at = None
        if blocked <= self._window:
            return
        if blocked <= self._max:
            self._window = min(self._max, max(self._grow_start, self._window * 2))
        else:
            halved = self._window / 2
            self._window = halved if halved >= _FLOOR_SECONDS else 0.0

    def _tick(self) -> None:
        loop = self._loop
        if loop is None:
            return
        now = self._clock()
        if now < self._deadline and not loop.is_closed():
            loop.call_soon(self._tick)
            return
        self._loop = None
        self._ran_out_at = now
        if self._observer is not None:
            self._observer.idle_poll_ran_out(self._window)
