"""How this machine's idle CPUs wait, and so whether the edge's own idle polling pays.

``EDGE_IDLE_POLL_MICROSECONDS`` unset (``auto``) polls only where it was measured to pay: a
KVM guest running the ``haltpoll`` cpuidle driver with ``guest_halt_poll_ns`` = 0. There an
idle vCPU halts at once, and while that driver runs the guest asks the host not to poll for it
(KVM's poll-control feature), so nobody polls and every wake-up is a full halt and resume;
the edge's polling bought 1.13-1.31x the GetTask requests at concurrency 1 on such hosts
(bench/ROUNDS.md, rounds thirty-four to thirty-six). Elsewhere someone already polls, or a
wake-up is cheap: with the guest's polling on (``guest_halt_poll_ns`` > 0) the edge's added
1.03x for 1.17x the CPU (round thirty-four); with no cpuidle driver the guest halts into
the host, which can poll on its side (invisible from here; a prepared ``SELECT 1`` took
55-60 µs on such a host against 90-139 µs), and the edge's polling gave 0.81-0.97x with two
processes and 0.87-1.14x with one (round thirty-seven). On bare metal and unknown hosts it
was never measured, so ``auto`` leaves it off; an explicit value always wins.
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

    def describe(self) -> str:
        if self.driver is None:
            return "no cpuidle driver"
        if self.driver == "haltpoll":
            return f"haltpoll driver, guest_halt_poll_ns {self.guest_halt_poll_ns}"
        return f"cpuidle driver {self.driver}"


def auto_idle_poll_microseconds(host: HostIdle) -> int:
    """``EDGE_IDLE_POLL_MICROSECONDS`` when unset: the default window where polling pays, else 0."""
    return POLL_MICROSECONDS if host.halts_at_once else 0


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
