"""Streaming benchmark (issue 49): events per second delivered to many concurrent SSE
subscribers, and the latency from the writer's write to the subscriber (p50/p99), for the edge
across two processes next to the official a2a-sdk server, measured side by side in each run.

    python -m bench.streaming            # three runs of the default shape, then the medians

The workload is the same for both servers (``bench/stream_client.py``, one client): ``--tasks``
turns, each started with ``SendMessage`` (``returnImmediately``), each followed by
``--subscribers / --tasks`` ``SubscribeToTask`` streams. Every turn sleeps ``--wait`` seconds
(so every subscriber is connected before the first event), then publishes ``--events``
WORKING status updates back to back, each a short text message, then completes.

- edge, on PostgreSQL: process A ``serve --no-worker --no-push`` takes every call and every
  stream; process B ``serve`` runs the worker, whose scripted turn (``sleep``, ``progress``
  lines, ``reply``) writes each update through the real write path (a fenced commit); A hears
  of each commit by ``LISTEN/NOTIFY`` and reads it from the task's event log.
- a2a-sdk 1.3 (``bench/sdk_stream_server.py``): one uvicorn process (its streams live in that
  process's memory), ``DefaultRequestHandler``, in-memory store and queues; its agent executor
  publishes the updates through its ``TaskUpdater``.

Events counted: status updates (``--events`` and the final one per stream). Rate: events
delivered / (last arrival - first write). The runs alternate which server goes first.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench import pg, procs
from bench.config import AUDIENCE
from bench.gateway import BenchGateway
from bench.procs import VENV_BIN, Proc
from bench.servers import MANIFEST, EdgeConfig, uvicorn_server
from bench.stream_client import Shape, Tally, run_streams

TENANT = "bench"

Figures = dict[str, float]


def _script(shape: Shape) -> str:
    lines = "".join(f"progress e{i}\n" for i in range(shape.events))
    return f"sleep {shape.wait}\n{lines}reply done"


def _measured(tally: Tally, server: Proc, client_cpu: float) -> Figures:
    """The tally's figures, with the CPU seconds the streaming process and this client spent
    from the first event on (the delivery, past the subscribers' connecting)."""
    figures = tally.summary()
    figures["server_cpu_s"] = server.cpu_seconds() - tally.cpu_at_first
    figures["client_cpu_s"] = time.process_time() - client_cpu
    return figures


def _edge_streams(a: Proc, gateway: BenchGateway, shape: Shape) -> Tally:
    tokens = [
        gateway.mint(audience=AUDIENCE, tenant=TENANT, identity=f"s{k}") for k in range(shape.tasks)
    ]
    headers = [{"Authorization": f"Bearer {t}", "A2A-Version": "1.0"} for t in tokens]
    now = time.time_ns()
    messages = [
        {"messageId": f"bench-{k}-{now}", "role": "ROLE_USER", "parts": [{"text": _script(shape)}]}
        for k in range(shape.tasks)
    ]
    return asyncio.run(run_streams(a.port or 0, messages, headers, shape, a.cpu_seconds, TENANT))


def _add_tenant(config: EdgeConfig, database: str) -> None:
    argv = [str(VENV_BIN / "looping-edge"), "tenants", "add", TENANT, "--manifest", str(MANIFEST)]
    argv += ["--agent", "scripted", "--require-push-config", "false"]
    procs.run_checked(argv, env=config.env(database), what="tenants add")


def _edge(shape: Shape, log_dir: Path, gateway: BenchGateway) -> Figures:
    dbs = pg.Databases()
    started: list[Proc] = []
    try:
        database = dbs.create("stream")
        config = EdgeConfig(gateway_origins=[gateway.origin])
        config.migrate(database)
        _add_tenant(config, database)
        limits = {
            "EDGE_STREAM_MAX_PER_IDENTITY": str(shape.subscribers),
            "EDGE_STREAM_MAX_PER_PROCESS": str(shape.subscribers),
            "EDGE_MAX_CONNECTIONS": str(shape.subscribers + 100),
        }
        a = config.serve("edge-a", database, log_dir, background=False, **limits)
        started.append(a)
        b = config.serve("edge-b", database, log_dir, background=True, **limits)
        started.append(b)
        client_cpu = time.process_time()
        return _measured(_edge_streams(a, gateway, shape), a, client_cpu)
    finally:
        for proc in started:
            proc.stop()
        dbs.drop_all()


def _sdk(shape: Shape, log_dir: Path) -> Figures:
    env = {"BENCH_STREAM_WAIT": str(shape.wait), "BENCH_STREAM_EVENTS": str(shape.events)}
    server = uvicorn_server("sdk-stream", "bench.sdk_stream_server:app", log_dir, env=env)
    try:
        messages = [
            {"messageId": f"sdk-{k}", "role": "ROLE_USER", "parts": [{"text": "go"}]}
            for k in range(shape.tasks)
        ]
        headers = [{"A2A-Version": "1.0"}] * shape.tasks
        client_cpu = time.process_time()
        tally = asyncio.run(
            run_streams(server.port or 0, messages, headers, shape, server.cpu_seconds)
        )
        return _measured(tally, server, client_cpu)
    finally:
        server.stop()


def _line(name: str, f: Figures) -> str:
    per_event = 1e6 / f["delivered"] if f["delivered"] else float("nan")
    return (
        f"  {name}: {f['events_per_s']:.6g} events/s ({int(f['delivered'])} delivered, "
        f"{int(f['cut_short'])} streams cut short, {f['event_bytes']:.4g} B each) over "
        f"{f['window_s']:.4g} s (writes spread over {f['producer_s']:.4g} s, the last stream "
        f"open {f['open_lead_s']:.3g} s before the first); latency p50 "
        f"{f['p50_ms']:.6g} ms, p99 {f['p99_ms']:.6g} ms; CPU per event delivered: streaming "
        f"process {f['server_cpu_s'] * per_event:.4g} µs, "
        f"client {f['client_cpu_s'] * per_event:.4g} µs"
    )


def _one_run(index: int, shape: Shape, log_dir: Path, gateway: BenchGateway) -> dict[str, Figures]:
    load = os.getloadavg()
    print(f"run {index + 1}: load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    order = ["edge", "sdk"] if index % 2 == 0 else ["sdk", "edge"]
    figures: dict[str, Figures] = {}
    for name in order:
        figures[name] = _edge(shape, log_dir, gateway) if name == "edge" else _sdk(shape, log_dir)
    print(_line("edge (2 processes, PostgreSQL)", figures["edge"]))
    print(_line("a2a-sdk (1 process, in memory)", figures["sdk"]))
    ratio = figures["edge"]["events_per_s"] / figures["sdk"]["events_per_s"]
    print(f"  ratio edge / a2a-sdk events/s: {ratio:.6g}", flush=True)
    figures["edge"]["ratio"] = ratio
    return figures


def _medians(runs: list[dict[str, Figures]]) -> None:
    print(f"medians over {len(runs)} runs:")
    for name in ("edge", "sdk"):
        m = {k: statistics.median(r[name][k] for r in runs) for k in runs[0][name]}
        print(
            f"  {name}: {m['events_per_s']:.6g} events/s, latency p50 {m['p50_ms']:.6g} ms, "
            f"p99 {m['p99_ms']:.6g} ms"
        )
    ratio = statistics.median(r["edge"]["ratio"] for r in runs)
    print(f"  ratio edge / a2a-sdk events/s (median of the runs' ratios): {ratio:.6g}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.streaming")
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--wait", type=float, default=8.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    shape = Shape(args.subscribers, args.tasks, args.events, args.wait)
    print(
        f"shape: {shape.tasks} tasks x {shape.per_task} subscribers, {shape.events} events "
        f"per task, wait {shape.wait} s"
    )
    log_dir = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    gateway = BenchGateway()
    gateway.start()
    runs = []
    try:
        for index in range(args.runs):
            runs.append(_one_run(index, shape, log_dir, gateway))
    finally:
        gateway.stop()
    _medians(runs)
    print(f"logs: {log_dir}")


if __name__ == "__main__":
    main()
