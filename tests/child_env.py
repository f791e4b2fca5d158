"""The environment of a `looping-edge` child process in tests (serve, worker, CLI).

Starts from the test's own environment without any edge setting, so a developer's exported
`EDGE_*`/`A2A_*` variables never leak into a child, then sets the given configuration; fast
test timings go in as keyword knobs (`poll_seconds=0.2` → `EDGE_POLL_SECONDS=0.2`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = str(ROOT / ".venv" / "bin" / "looping-edge")
_OWNED = ("DATABASE_URL", "PUBLIC_URL", "GATEWAY_ORIGINS")


def child_env(
    database_url: str,
    *,
    signing_jwk: dict[str, str],
    public_url: str,
    origins: list[str],
    **knobs: object,
) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EDGE_", "A2A_", "OTEL_")) and k not in _OWNED
    }
    env.update(
        DATABASE_URL=database_url,
        A2A_SIGNING_KEY=json.dumps(signing_jwk),
        PUBLIC_URL=public_url,
        GATEWAY_ORIGINS=json.dumps(origins),
        EDGE_ALLOW_LOOPBACK_HTTP="true",
        EDGE_LOG_JSON="true",
    )
    env.update({f"EDGE_{k.upper()}": str(v) for k, v in knobs.items()})
    return env


def stop_child(proc: subprocess.Popen[bytes]) -> None:
    """End a child that may still run: SIGTERM (after SIGCONT: a stopped process cannot
    handle SIGTERM), then SIGKILL if it has not exited within 15 seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
