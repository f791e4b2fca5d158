"""What of the host a benchmark table must name besides its CPU's name: the CPU's family and
model (these guests report a generic name, ``AMD EPYC`` or ``Intel(R) Xeon(R) Processor``,
whatever the generation) and how an idle virtual CPU waits.

On some hosts the second decided c = 1 more than any code here: with the ``haltpoll`` cpuidle
driver and ``guest_halt_poll_ns`` = 0 an idle vCPU halts at once, so a request that waits for
PostgreSQL pays a full halt and resume on each side of the round trip, and the same host with
the guest polling answered the edge's GetTask much faster at c = 1. With
no cpuidle driver the guest halts at once too and the parameter is not read; what a halt
costs there is the host's business (KVM can poll on its side), invisible from here. Both are
read from ``/proc`` and ``/sys`` so each run's table says which kind of host it came from.

A third thing moves a run's figures and is visible from inside: steal time, the share of its
vCPUs' time the hypervisor gave to something else (``/proc/stat``). On one host an occasional
run of benchmark 2 lost a large share of the machine's time to it under load; each
benchmark's notes now say how much was stolen while it ran, so such a run can be told from
a slow edge (a host that runs its vCPUs slower without taking time away shows in the bare
endpoint's CPU per request instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


def cpu_name(cpuinfo: str, fallback: str = "?") -> str:
    """``model name`` with the family and model numbers, e.g. ``AMD EPYC (family 26, model 2)``;
    ``fallback`` where the kernel gives no model name (as on some ARM hosts)."""
    name = _field(cpuinfo, "model name") or fallback
    family, model = _field(cpuinfo, "cpu family"), _field(cpuinfo, "model")
    if family and model:
        return f"{name} (family {family}, model {model})"
    return name


def _field(cpuinfo: str, key: str) -> str | None:
    found = re.search(rf"^{re.escape(key)}\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    return found.group(1).strip() if found else None


@dataclass(frozen=True)
class IdleState:
    """The cpuidle driver (``None`` when the kernel runs none) and, when the ``haltpoll``
    module is present, its ``guest_halt_poll_ns``."""

    driver: str | None
    halt_poll_ns: int | None

    @classmethod
    def read(cls, sys_root: Path = Path("/sys")) -> IdleState:
        driver = _read(sys_root / "devices/system/cpu/cpuidle/current_driver")
        poll = _read(sys_root / "module/haltpoll/parameters/guest_halt_poll_ns")
        return cls(
            driver=None if driver in (None, "", "none") else driver,
            halt_poll_ns=int(poll) if poll is not None and poll.isdigit() else None,
        )

    def describe(self) -> str:
        driver = f"cpuidle driver {self.driver}" if self.driver else "no cpuidle driver"
        if self.halt_poll_ns is None:
            return driver
        if self.driver != "haltpoll":
            # Only the haltpoll governor reads the parameter, and it runs with the
            # cpuidle-haltpoll driver (kernel docs, "Guest halt polling"); under any other
            # driver, or none, the value is inert however it is set.
            return f"{driver} (guest_halt_poll_ns {self.halt_poll_ns} unused without haltpoll)"
        return f"{driver}, guest_halt_poll_ns {self.halt_poll_ns}"

    @property
    def polling_off(self) -> bool:
        """The haltpoll driver with its polling set to 0: a setting of the guest's own that
        makes every idle wake-up a full halt (without a driver the guest halts too, but has
        no such setting to change)."""
        return self.driver == "haltpoll" and self.halt_poll_ns == 0

    def note(self) -> str | None:
        if not self.polling_off:
            return None
        return (
            "host: cpuidle driver haltpoll with guest_halt_poll_ns = 0, so an idle vCPU halts "
            "at once and every wake-up (two per PostgreSQL round trip at c = 1) is a full halt "
            "and resume; c = 1 figures carry it"
        )


@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU time since boot in clock ticks, summed over every CPU (the ``cpu``
    line of ``/proc/stat``): all of it, and the part stolen by the hypervisor."""

    total: int
    steal: int

    @classmethod
    def read(cls, proc_root: Path = Path("/proc")) -> CpuTimes | None:
        """``None`` where ``/proc/stat`` is missing or has no steal column (kernels < 2.6.11)."""
        text = _read(proc_root / "stat")
        line = next((ln for ln in (text or "").splitlines() if ln.startswith("cpu ")), None)
        if line is None:
            return None
        fields = line.split()[1:]
        if len(fields) < 8 or not all(f.isdigit() for f in fields):
            return None
        ticks = [int(f) for f in fields]
        # Fields 9 and 10 (guest, guest_nice) are already counted in user and nice
        # (proc(5)), so the total is the first eight.
        return cls(total=sum(ticks[:8]), steal=ticks[7])

    def steal_note(self, earlier: CpuTimes) -> str:
        """How much of the time since ``earlier`` was stolen, for a benchmark's notes."""
        elapsed = self.total - earlier.total
        if elapsed <= 0:
            return "host steal time not measured (no CPU time passed)"
        if self.steal == 0:
            # A guest without a steal clock reads 0 for ever; only a non-zero count since
            # boot shows that the host reports it at all.
            return "host steal time 0 since boot (the hypervisor may not report it)"
        share = (self.steal - earlier.steal) / elapsed
        return f"host steal time {share:.1%} of the vCPUs' time while it ran"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
