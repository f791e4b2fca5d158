"""Server processes: start in their own process group, wait until they answer, measure RSS,
stop (SIGTERM, then SIGKILL of that group only)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    port: int | None
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def url(self, path: str = "/a2a") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def tree_pids(self) -> list[int]:
        """This process and its descendants (uvicorn's worker processes)."""
        pids = [self.pid]
        i = 0
        while i < len(pids):
            try:
                text = Path(f"/proc/{pids[i]}/task/{pids[i]}/children").read_text()
            except OSError:
                text = ""
            pids.extend(int(p) for p in text.split())
            i += 1
        return pids

    def rss_bytes(self) -> int:
        """Resident set size of the whole process tree."""
        return sum(rss_of(pid) for pid in self.tree_pids())

    def cpu_seconds(self) -> float:
        """CPU time used so far by every thread of the whole process tree."""
        return sum(cpu_seconds_of(pid) for pid in self.tree_pids())

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)


def cpu_seconds_of(pid: int) -> float:
    """The CPU time of every thread of ``pid``: the scheduler's own nanosecond count
    (``/proc/<pid>/task/<tid>/schedstat``), not ``utime`` in clock ticks; 0 when it is gone."""
    total = 0
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in threads:
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def postgres_cpu_seconds() -> float:
    """The CPU time of every ``postgres`` process on this machine (the server, its backends
    and helpers; the bench's PostgreSQL serves nothing else while a benchmark runs). A
    backend that exits between two readings takes its CPU with it: read around a window in
    which the servers' pools keep their connections."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue
        if comm == "postgres":
            total += cpu_seconds_of(int(entry))
    return total


def rss_of(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def start(
    name: str,
    argv: list[str],
    *,
    env: dict[str, str],
    log_dir: Path,
    port: int | None = None,
    ready_path: str | None = "/livez",
    timeout: float = 60.0,
    wait: bool = True,
) -> Proc:
    """Start ``argv``; with ``wait`` (the default) return once it answers ``ready_path``.
    ``wait=False`` returns at once: call ``wait_ready`` (servers started side by side)."""
    log_path = log_dir / f"{name}.log"
    log = log_path.open("ab")
    popen = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stop() signals exactly this tree
    )
    log.close()
    proc = Proc(name=name, popen=popen, port=port, log_path=log_path)
    if wait and port is not None and ready_path is not None:
        wait_ready(proc, ready_path, timeout)
    return proc


def wait_ready(proc: Proc, path: str = "/livez", timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.log_tail()}")
        try:
            if httpx.get(proc.url(path), timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.stop()
    raise RuntimeError(
        f"{proc.name} did not answer {path} within {timeout:.0f}s:\n{proc.log_tail()}"
    )


def run_checked(argv: list[str], *, env: dict[str, str], what: str) -> str:
    return run_all_checked([(argv, what)], env=env)[0]


def run_all_checked(commands: list[tuple[list[str], str]], *, env: dict[str, str]) -> list[str]:
    """Independent commands side by side (each ``(argv, what)``); their outputs in order.

    A command line of the edge spends most of its time importing, so two at once on two cores
    take about as long as one."""
    running = [
        (
            subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**os.environ, **env},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
            what,
        )
        for argv, what in commands
    ]
    outputs: list[str] = []
    failures: list[str] = []
    for popen, what in running:
        out, err = popen.communicate()
        outputs.append(out)
        if popen.returncode != 0:
            failures.append(f"{what} failed ({popen.returncode}): {err.strip()[-2000:]}")
    if failures:
        raise RuntimeError("\n".join(failures))
    return outputs
