"""What every benchmark gets: the profile, the report, the gateway, the edge configuration,
the run's databases, a scratch directory, and process bookkeeping (everything started is
stopped at the end, whatever happens)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import loadgen, pg
from bench.config import AUDIENCE, GROWTH_TENANT, HOT_IDENTITIES, TENANT, Profile
from bench.gateway import BenchGateway
from bench.host import CpuTimes
from bench.loadgen import HttpResult
from bench.procs import Proc
from bench.report import Report
from bench.seed import HOT_SET, load_edge_tasks, seed_sdk
from bench.servers import EdgeConfig


@dataclass
class Ctx:
    profile: Profile
    report: Report
    tool: str
    run_dir: Path
    gateway: BenchGateway
    edge: EdgeConfig
    receiver_port: int
    dbs: pg.Databases = field(default_factory=pg.Databases)
    procs: list[Proc] = field(default_factory=list)
    _edge_db: str | None = None
    _template_db: str | None = None
    _sdk_db: str | None = None
    _runs: int = 0

    # --- databases ---------------------------------------------------------------------------

    def edge_database(self) -> str:
        """The run's edge database (``fresh_edge_database``) with 1,000 hot tasks of ``bench``."""
        if self._edge_db is None:
            name = self.fresh_edge_database("edge")
            load_edge_tasks(name, TENANT, 0, HOT_SET)
            self._edge_db = name
        return self._edge_db

    def fresh_edge_database(self, role: str) -> str:
        """Another migrated edge database with tenants ``bench`` and ``growth`` (echo) and no
        tasks (benchmarks that run turns must not inherit the accept benchmark's queued turns).

        Each is a copy of one template that ``looping-edge migrate`` and ``tenants add`` built
        once per run: running those commands for every database took a good share of
        ``--quick``'s minute."""
        if self._template_db is None:
            template = self.dbs.create("template")
            self.edge.migrate(template)
            self.edge.add_tenants(template, [TENANT, GROWTH_TENANT])
            self._template_db = template
        return self.dbs.create(role, template=self._template_db)

    def sdk_database(self) -> str:
        if self._sdk_db is None:
            name = self.dbs.create("sdk")
            seed_sdk(name)
            self._sdk_db = name
        return self._sdk_db

    # --- processes ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def running(self, proc: Proc) -> Iterator[Proc]:
        self.procs.append(proc)
        try:
            yield proc
        finally:
            proc.stop()
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in list(self.procs):
            proc.stop()
        self.procs.clear()

    # --- tokens and load ---------------------------------------------------------------------

    def edge_tokens(self, identities: list[str], tenant: str = TENANT) -> list[str]:
        return self.gateway.pool(
            audience=AUDIENCE, tenant=tenant, identities=identities, size=self.profile.token_pool
        )

    def pool_file(self, name: str, tokens: list[str], bodies: list[str]) -> Path:
        return loadgen.write_pool(self.run_dir / f"{name}.pool", tokens, bodies)

    def load(
        self, proc: Proc, pool_file: Path, connections: int, seconds: float | None = None
    ) -> HttpResult:
        assert proc.port is not None
        self._runs += 1
        cpu_before = proc.cpu_seconds()
        host_before = CpuTimes.read()
        result = loadgen.run(
            self.tool,
            port=proc.port,
            pool_file=pool_file,
            connections=connections,
            seconds=self.profile.http_seconds if seconds is None else seconds,
            salt=f"{self.dbs.prefix}-{self._runs}",
        )
        result = dataclasses.replace(result, server_cpu_seconds=proc.cpu_seconds() - cpu_before)
        host_after = CpuTimes.read()
        if host_before is not None and host_after is not None:
            result = dataclasses.replace(
                result,
                host_ticks=host_after.total - host_before.total,
                steal_ticks=host_after.steal - host_before.steal,
            )
        if result.bad:
            self.report.note(
                f"{proc.name} c={connections}: {result.bad} of {result.requests} answers were "
                "not a JSON-RPC result (excluded from req/s)"
            )
        if result.requests and result.bad == result.requests:
            raise RuntimeError(f"{proc.name}: every answer was an error; see the note above")
        return result

    def load_interleaved(
        self,
        targets: dict[str, tuple[Proc, Path]],
        *,
        concurrencies: tuple[int, ...] | None = None,
        seconds: float | None = None,
    ) -> dict[str, dict[int, HttpResult]]:
        """Every target at every concurrency, the targets taking turns: ``http_rounds`` rounds
        of ``http_seconds / http_rounds`` each, the order rotated every round. The machine's
        load changes from minute to minute (other tenants of the host); measured one after the
        other, a slow minute landed on one server and moved the ratio far more than the goals'
        margins; taking turns spreads it over all of them."""
        rounds = max(self.profile.http_rounds, 1)
        per_round = (self.profile.http_seconds if seconds is None else seconds) / rounds
        names = list(targets)
        results: dict[str, dict[int, HttpResult]] = {name: {} for name in names}
        for c in self.profile.concurrencies if concurrencies is None else concurrencies:
            runs: dict[str, list[HttpResult]] = {name: [] for name in names}
            for r in range(rounds):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    proc, pool = targets[name]
                    runs[name].append(self.load(proc, pool, c, per_round))
            for name in names:
                results[name][c] = HttpResult.combine(runs[name])
        return results

    def warm(self, proc: Proc, pool_file: Path) -> None:
        if self.profile.warmup_seconds > 0:
            with contextlib.suppress(RuntimeError):
                loadgen.run(
                    self.tool,
                    port=proc.port or 0,
                    pool_file=pool_file,
                    connections=16,
                    seconds=self.profile.warmup_seconds,
                    salt=f"{self.dbs.prefix}-warm-{self._runs}",
                )

    def rpc(self, proc: Proc, token: str, body: str) -> dict[str, Any]:
        """One call with httpx (probes and checks, not measurement)."""
        response = httpx.post(
            proc.url(),
            content=body,
            headers={
                "Authorization": f"Bearer {token}",
                "A2A-Version": "1.0",
                "Content-Type": "application/json",
            },
            timeout=30,
        )
        try:
            doc: dict[str, Any] = response.json()
        except json.JSONDecodeError:
            doc = {"http_status": response.status_code, "text": response.text[:200]}
        return doc


def hot_identities() -> list[str]:
    return [f"hot-{i}" for i in range(HOT_IDENTITIES)]
