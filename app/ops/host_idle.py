"""How this machine's idle CPUs wait, and so whether the edge's own idle polling pays.

``EDGE_IDLE_POLL_MICROSECONDS`` unset (``auto``) polls 200 µs except where the guest kernel
polls already: the ``haltpoll`` cpuidle driver with ``guest_halt_poll_ns`` > 0. There an idle
vCPU polls that long before it halts, and the edge's polling on top added 1.03x the GetTask
requests at concurrency 1 for 1.17x the CPU per request (bench/ROUNDS.md, round thirty-four).
Where nobody polls (the same driver with ``guest_halt_poll_ns`` = 0: while it runs the guest
asks the host not to poll for it) the edge's polling bought 1.13-1.31x (rounds thirty-four to
thirty-six). With no cpuidle driver the guest halts into the host, which can poll on its side
(invisible from here): on round thirty-seven's host the polled edge answered 0.869-1.186x
the unpolled one's requests at concurrency 1 with one process (above 1 in four of six runs)
and 0.807-1.162x with two, so ``auto`` keeps it on for the one-process default. Bare metal was
never measured, and keeps the window it always had. An explicit value always wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The Linux guest halt-polling default; 300 µs bought no more at concurrency 1 and 500 µs
# cost more CPU at every paced rate (bench/ROUNDS.md, round thirty-four).
POLL_MICROSECONDS = 200


@dataclass(frozen=True)
class HostIdle:
    """The cpuidle driver (``None`` when the kernel runs none or it cannot be read) and, when
    the ``haltpoll`` module is loaded, its ``guest_halt_poll_ns``."""

    driver: str | None
    guest_halt_poll_ns: int | None

    @classmethod
    def read(cls, sys_root: Path = Path("/sys")) -> HostIdle:
        driver = _read(sys_root / "devices/system/cpu/cpuidle/current_driver")
        poll = _read(sys_root / "module/haltpoll/parameters/guest_halt_poll_ns")
        return cls(
            driver=None if driver in (None, "", "none") else driver,
            guest_halt_poll_ns=int(poll) if poll is not None and poll.isdigit() else None,
        )

    @property
    def halts_at_once(self) -> bool:
        """An idle vCPU halts with nobody polling: the edge's polling saves each wake-up."""
        return self.driver == "haltpoll" and self.guest_halt_poll_ns == 0

    @property
    def guest_polls(self) -> bool:
        """The guest kernel polls before it halts an idle vCPU (the governor reads the
        parameter only under the ``haltpoll`` driver)."""
        return self.driver == "haltpoll" and bool(self.guest_halt_poll_ns)

    def describe(self) -> str:
        if self.driver is None:
            return "no cpuidle driver"
        if self.driver == "haltpoll":
            return f"haltpoll driver, guest_halt_poll_ns {self.guest_halt_poll_ns}"
        return f"cpuidle driver {self.driver}"


def auto_idle_poll_microseconds(host: HostIdle) -> int:
    """``EDGE_IDLE_POLL_MICROSECONDS`` when unset: 0 where the guest polls already, else the
    default window."""
    return 0 if host.guest_polls else POLL_MICROSECONDS


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
