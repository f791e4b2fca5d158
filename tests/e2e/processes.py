"""Real processes for end-to-end tests: ``looping-edge serve`` / ``worker`` / ``gateway-dev``.

Everything the test process does while a child runs is async (the receiver and the gateway
JWKS are served by the test's own event loop), so waits poll with ``asyncio.sleep``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / ".venv" / "bin" / "looping-edge")
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
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EDGE_", "A2A_"))
        and k not in ("DATABASE_URL", "PUBLIC_URL", "GATEWAY_ORIGINS")
    }
    env.update(
        DATABASE_URL=database_url,
        A2A_SIGNING_KEY=json.dumps(signing_jwk),
        PUBLIC_URL=f"http://127.0.0.1:{port}",
        GATEWAY_ORIGINS=json.dumps(origins),
        EDGE_ALLOW_LOOPBACK_HTTP="true",
        EDGE_LOG_JSON="true",
        EDGE_POLL_SECONDS="0.2",
        EDGE_LEASE_SECONDS="2",
        EDGE_TURN_RETRY_BASE_SECONDS="0.1",
        EDGE_PUSH_RETRY_BASE_SECONDS="0.2",
        EDGE_PUSH_RETRY_MAX_SECONDS="0.5",
        EDGE_PUSH_TIMEOUT_SECONDS="1",
    )
    env.update({f"EDGE_{k.upper()}": str(v) for k, v in knobs.items()})
    return env


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
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def wait_ready(base_url: str, child: Process, *, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(trust_env=False) as client:
        while True:
            child.check_alive()
            try:
                if (await client.get(base_url + "/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{child.name} not ready:\n{child.logs()[-3000:]}")
            await asyncio.sleep(0.1)


async def until(
    probe: Callable[[], Awaitable[T | None]], *alive: Process, within: float = 30.0
) -> T:
    deadline = time.monotonic() + within
    while True:
        for child in alive:
            child.check_alive()
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.1)
