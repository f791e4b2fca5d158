"""Real processes for end-to-end tests: ``looping-edge serve`` / ``worker`` / ``gateway-dev``.

Everything the test process does while a child runs is async (the receiver and the gateway
JWKS are served by the test's own event loop), so waits poll with ``asyncio.sleep``.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from tests.child_env import CLI, child_env, stop_child
from tests.polling import poll_until

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def edge_env(
    database_url: str,
    *,
    port: int,
    signing_jwk: dict[str, str],
    origins: list[str],
    **knobs: object,
) -> dict[str, str]:
    fast: dict[str, object] = {
        "poll_seconds": 0.2,
        "lease_seconds": 2,
        "turn_retry_base_seconds": 0.1,
        "push_retry_base_seconds": 0.2,
        "push_retry_max_seconds": 0.5,
        "push_timeout_seconds": 1,
        **knobs,
    }
    return child_env(
        database_url,
        signing_jwk=signing_jwk,
        public_url=f"http://127.0.0.1:{port}",
        origins=origins,
        **fast,
    )


@dataclass
class Process:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def logs(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(
                f"{self.name} exited {self.proc.returncode}:\n{self.logs()[-3000:]}"
            )

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


@contextmanager
def process(name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> Iterator[Process]:
    log = log_dir / f"{name}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [CLI, *argv], env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=str(log_dir)
        )
    child = Process(name, proc, log)
    try:
        yield child
    finally:
        stop_child(proc)


async def wait_ready(base_url: str, child: Process, *, within: float = 30.0) -> None:
    async with httpx.AsyncClient(trust_env=False) as client:

        async def ready() -> bool:
            try:
                return (await client.get(base_url + "/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            await poll_until(ready, within, interval=0.1, check=child.check_alive)
        except AssertionError:
            raise AssertionError(f"{child.name} not ready:\n{child.logs()[-3000:]}") from None


async def until(
    probe: Callable[[], Awaitable[T | None]], *alive: Process, within: float = 30.0
) -> T:
    def check() -> None:
        for child in alive:
            child.check_alive()

    return await poll_until(probe, within, interval=0.1, check=check)
