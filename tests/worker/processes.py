"""Worker processes for crash tests: ``looping-edge worker`` started with a test environment."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.security.keys import generate_private_jwk
from tests.child_env import CLI, child_env, stop_child

LOOPBACK_PUSH_ORIGIN = "http://127.0.0.1:9"  # discard port: nothing listens, refused at once


def worker_env(database_url: str, **settings: object) -> dict[str, str]:
    knobs: dict[str, object] = {
        "lease_seconds": 2,
        "poll_seconds": 0.2,
        "turn_retry_base_seconds": 0.1,
        **settings,
    }
    return child_env(
        database_url,
        signing_jwk=generate_private_jwk("worker-test"),
        public_url="https://edge.test",
        origins=["https://gateway.test", LOOPBACK_PUSH_ORIGIN],
        **knobs,
    )


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    log: Path

    def logs(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def events(self) -> list[str]:
        out = []
        for line in self.logs().splitlines():
            try:
                out.append(str(json.loads(line).get("msg")))
            except (ValueError, AttributeError):
                continue
        return out

    def check_alive(self) -> None:
        """Fail fast (with the process's own words) if the worker exited on its own."""
        if self.proc.poll() is not None and self.proc.returncode != -signal.SIGKILL:
            raise AssertionError(f"worker exited {self.proc.returncode}: {self.logs()[-2000:]}")

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)


@contextmanager
def worker_process(
    database_url: str,
    log_dir: Path,
    name: str,
    *args: str,
    extra_env: Mapping[str, str] | None = None,
    **settings: object,
) -> Iterator[WorkerProcess]:
    """``extra_env``: variables set as given (``OTEL_*``); ``settings`` become ``EDGE_*``."""
    log = log_dir / f"{name}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [CLI, "worker", *args],
            env={**worker_env(database_url, **settings), **(extra_env or {})},
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=str(log_dir),
        )
    worker = WorkerProcess(proc, log)
    try:
        yield worker
    finally:
        stop_child(proc)
