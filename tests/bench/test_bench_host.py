"""The host description every benchmark table carries (``bench/host.py``)."""

from __future__ import annotations

from pathlib import Path

from bench.host import CpuTimes, IdleState, cpu_name
from bench.report import Report

CPUINFO = "processor\t: 0\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\nflags\t: fpu\n"


def test_cpu_name_carries_family_and_model() -> None:
    assert cpu_name(CPUINFO) == "AMD EPYC (family 26, model 2)"
    assert cpu_name("model name\t: Some CPU\n") == "Some CPU"
    assert cpu_name("") == "?"
    assert cpu_name("processor\t: 0\nBogoMIPS\t: 50.00\n", "aarch64") == "aarch64"


def _sysfs(root: Path, driver: str | None, poll: str | None) -> Path:
    if driver is not None:
        d = root / "devices/system/cpu/cpuidle"
        d.mkdir(parents=True)
        (d / "current_driver").write_text(driver + "\n")
    if poll is not None:
        m = root / "module/haltpoll/parameters"
        m.mkdir(parents=True)
        (m / "guest_halt_poll_ns").write_text(poll + "\n")
    return root


def test_haltpoll_without_polling_is_named_and_noted(tmp_path: Path) -> None:
    idle = IdleState.read(_sysfs(tmp_path, "haltpoll", "0"))
    assert idle == IdleState(driver="haltpoll", halt_poll_ns=0)
    assert idle.describe() == "cpuidle driver haltpoll, guest_halt_poll_ns 0"
    assert idle.polling_off
    note = idle.note()
    assert note is not None and "guest_halt_poll_ns = 0" in note


def test_polling_hosts_and_hosts_without_a_driver_get_no_note(tmp_path: Path) -> None:
    polling = IdleState.read(_sysfs(tmp_path / "a", "haltpoll", "200000"))
    assert not polling.polling_off and polling.note() is None
    no_driver = IdleState.read(_sysfs(tmp_path / "b", "none", "200000"))
    assert no_driver == IdleState(driver=None, halt_poll_ns=200000)
    # The parameter is read only with the haltpoll driver: the line must not suggest polling.
    assert no_driver.describe() == (
        "no cpuidle driver (guest_halt_poll_ns 200000 unused without haltpoll)"
    )
    assert no_driver.note() is None
    other = IdleState.read(_sysfs(tmp_path / "d", "acpi_idle", "200000"))
    assert other.describe() == (
        "cpuidle driver acpi_idle (guest_halt_poll_ns 200000 unused without haltpoll)"
    )
    assert not other.polling_off and other.note() is None
    bare_metal = IdleState.read(_sysfs(tmp_path / "c", "intel_idle", None))
    assert bare_metal.describe() == "cpuidle driver intel_idle" and bare_metal.note() is None
    nothing = IdleState.read(tmp_path / "missing")
    assert nothing == IdleState(driver=None, halt_poll_ns=None)
    assert nothing.describe() == "no cpuidle driver"


def test_markdown_header_names_the_idle_state(tmp_path: Path) -> None:
    machine = {"cpu": "x", "cores": 2, "postgres": "15", "idle": "no cpuidle driver"}
    report = Report(profile="quick", loadgen="wrk", machine=machine)
    report.write(tmp_path)
    header = (tmp_path / "latest.md").read_text().splitlines()[0]
    assert "PostgreSQL 15, no cpuidle driver; run" in header
    old = Report(profile="quick", loadgen="wrk", machine={"cpu": "x", "postgres": "15"})
    old.write(tmp_path / "old")
    assert "PostgreSQL 15; run" in (tmp_path / "old" / "latest.md").read_text()


def _stat(root: Path, cpu_line: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(f"{cpu_line}\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\n")
    return root


def test_cpu_times_read_the_machine_line_of_proc_stat(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice (proc(5)).
    times = CpuTimes.read(_stat(tmp_path, "cpu  100 0 20 300 5 0 5 70 40 0"))
    # guest time is already inside user: the total is the first eight fields.
    assert times == CpuTimes(total=500, steal=70)
    assert CpuTimes.read(_stat(tmp_path / "old", "cpu  100 0 20 300 5 0 5")) is None
    assert CpuTimes.read(_stat(tmp_path / "odd", "cpu  100 x 20 300 5 0 5 7")) is None
    assert CpuTimes.read(tmp_path / "missing") is None
    real = CpuTimes.read()
    assert real is not None and real.total > 0 and real.steal >= 0


def test_steal_note_gives_the_share_and_admits_a_host_that_reports_none() -> None:
    before = CpuTimes(total=1000, steal=10)
    assert CpuTimes(total=1400, steal=22).steal_note(before) == (
        "host steal time 3.0% of the vCPUs' time while it ran"
    )
    assert CpuTimes(total=1400, steal=10).steal_note(before) == (
        "host steal time 0.0% of the vCPUs' time while it ran"
    )
    # A guest without a steal clock reads 0 for ever: that is no evidence of an idle host.
    never = CpuTimes(total=1400, steal=0).steal_note(CpuTimes(total=1000, steal=0))
    assert never == "host steal time 0 since boot (the hypervisor may not report it)"
    assert "not measured" in before.steal_note(before)
