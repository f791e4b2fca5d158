"""Starting the servers under test, each the way it is deployed.

- the edge: ``looping-edge serve`` (the Dockerfile's command: uvicorn, ``app.asgi:app``) with
  ``--workers N``; ``looping-edge worker`` for separate worker processes;
- the a2a-sdk baseline and the bare endpoint: the ``uvicorn`` command line with the same
  settings (httptools + uvloop, no access log, no proxy headers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from app.security.keys import generate_private_jwk
from bench import pg, procs
from bench.config import PUBLIC_URL
from bench.procs import ROOT, VENV_BIN, Proc

MANIFEST = ROOT / "examples" / "demo-manifest.json"


@dataclass
class EdgeConfig:
    """Environment of every edge process of one run (the same key and origins)."""

    gateway_origins: list[str]
    key_json: str = field(default_factory=lambda: json.dumps(generate_private_jwk("bench-edge")))

    def env(self, database: str, **extra: str) -> dict[str, str]:
        env = {
            "A2A_SIGNING_KEY": self.key_json,
            "GATEWAY_ORIGINS": json.dumps(self.gateway_origins),
            "PUBLIC_URL": PUBLIC_URL,
            "DATABASE_URL": pg.sqlalchemy_url(database),
            "EDGE_ALLOW_LOOPBACK_HTTP": "true",
            # Push delivery to the bench receiver: fast first attempt, no long backoff.
            "EDGE_POLL_SECONDS": "1",
        }
        env.update(extra)
        return env

    def migrate(self, database: str) -> None:
        procs.run_checked(
            [str(VENV_BIN / "looping-edge"), "migrate"],
            env=self.env(database),
            what="looping-edge migrate",
        )

    def add_tenants(self, database: str, tenants: list[str], agent: str = "echo") -> None:
        """``looping-edge tenants add`` for each tenant, the commands side by side."""
        procs.run_all_checked(
            [
                (
                    [
                        str(VENV_BIN / "looping-edge"),
                        "tenants",
                        "add",
                        tenant,
                        "--manifest",
                        str(MANIFEST),
                        "--agent",
                        agent,
                    ],
                    f"looping-edge tenants add {tenant}",
                )
                for tenant in tenants
            ],
            env=self.env(database),
        )

    def serve(
        self,
        name: str,
        database: str,
        log_dir: Path,
        *,
        workers: int = 1,
        background: bool = True,
        wait: bool = True,
        **extra_env: str,
    ) -> Proc:
        port = procs.free_port()
        argv = [
            str(VENV_BIN / "looping-edge"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ]
        if not background:
            argv += ["--no-worker", "--no-push"]
        return procs.start(
            name, argv, env=self.env(database, **extra_env), log_dir=log_dir, port=port, wait=wait
        )

    def worker(self, name: str, database: str, log_dir: Path, **extra_env: str) -> Proc:
        argv = [str(VENV_BIN / "looping-edge"), "worker"]
        proc = procs.start(
            name, argv, env=self.env(database, **extra_env), log_dir=log_dir, port=None
        )
        return proc


def uvicorn_server(
    name: str,
    app: str,
    log_dir: Path,
    *,
    workers: int = 1,
    env: dict[str, str] | None = None,
    wait: bool = True,
) -> Proc:
    port = procs.free_port()
    argv = [
        str(VENV_BIN / "uvicorn"),
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--no-access-log",
        "--no-proxy-headers",
        "--no-server-header",
        "--log-level",
        "warning",
    ]
    return procs.start(name, argv, env=env or {}, log_dir=log_dir, port=port, wait=wait)


def sdk_server(name: str, log_dir: Path, sdk_db: str, *, workers: int, wait: bool = True) -> Proc:
    """The a2a-sdk baseline (``bench/sdk_server.py``) on its own database."""
    env = {"BENCH_SDK_DB_URL": pg.sqlalchemy_url(sdk_db)}
    return uvicorn_server(
        name, "bench.sdk_server:app", log_dir, workers=workers, env=env, wait=wait
    )
