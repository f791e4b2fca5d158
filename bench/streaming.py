"""Streaming benchmark (issue 49): events per second delivered to many concurrent SSE
subscribers across two edge processes, and the latency a subscriber sees from the worker's
write (the status timestamp the writer stored) to the event's arrival (p50/p99); next to the
official a2a-sdk server streaming the same turn (``bench/sdk_stream_server.py``, one process:
its streams live in one process's memory).

Edge set-up on PostgreSQL: process A ``serve --no-worker --no-push``, process B ``serve`` with
its worker; ``--tasks`` scripted turns (``sleep``, then ``--events`` progress lines back to
back, then a reply), each followed by ``--subscribers / --tasks`` SubscribeToTask streams, half
on A and half on B. The sleep lets every subscriber connect before the first event.

    python -m bench.streaming [--subscribers 1000] [--tasks 10] [--events 50] [--wait 8]

Prints one line per server: subscribers, events delivered, events/s, p50/p99 latency (ms).
The load generator (raw asyncio sockets, this process) shares the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import pg, procs
from bench.config import AUDIENCE
from bench.gateway import BenchGateway
from bench.procs import VENV_BIN, Proc
from bench.servers import MANIFEST, EdgeConfig, uvicorn_server

TENANT = "bench"


@dataclass
class Tally:
    """What the subscribers received."""

    latencies: list[float] = field(default_factory=list)
    first_write: float = float("inf")
    last_arrival: float = 0.0
    delivered: int = 0
    incomplete: int = 0

    def event(self, result: dict[str, Any], arrived: float) -> bool:
        """Count one event; True when it ends the stream."""
        update = result.get("statusUpdate")
        if update is None:
            return False
        status = update["status"]
        written = datetime.fromisoformat(status["timestamp"].replace("Z", "+00:00")).timestamp()
        self.delivered += 1
        self.latencies.append(arrived - written)
        self.first_write = min(self.first_write, written)
        self.last_arrival = max(self.last_arrival, arrived)
        return bool(status["state"] != "TASK_STATE_WORKING")

    def line(self, name: str, subscribers: int) -> str:
        window = self.last_arrival - self.first_write
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) * 1000 if ordered else float("nan")
        p99 = ordered[int(len(ordered) * 0.99) - 1] * 1000 if ordered else float("nan")
        rate = self.delivered / window if window > 0 else float("nan")
        return (
            f"{name}: subscribers {subscribers}, events delivered {self.delivered} "
            f"(streams cut short: {self.incomplete}), {rate:.6g} events/s over {window:.6g} s, "
            f"latency p50 {p50:.6g} ms, p99 {p99:.6g} ms"
        )


async def _sse(
    port: int, body: dict[str, Any], headers: dict[str, str], on_event: Callable[[Any], bool]
) -> None:
    """One SSE call on a raw connection; ``on_event`` gets each JSON-RPC response and says
    when the stream is done."""
    payload = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    writer.write(
        (
            f"POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(payload)}\r\n{head}\r\n"
        ).encode()
        + payload
    )
    await writer.drain()
    try:
        while line := await reader.readline():
            if line.startswith(b"data: ") and on_event(json.loads(line[6:])):
                return
        raise ConnectionError("stream ended early")
    finally:
        writer.close()


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _follow(tally: Tally) -> Callable[[Any], bool]:
    def on_event(doc: Any) -> bool:
        if "error" in doc:
            raise RuntimeError(f"stream refused: {doc['error']}")
        return tally.event(doc["result"], time.time())

    return on_event


async def _subscribers(calls: list[Callable[[], Any]], tally: Tally) -> None:
    results = await asyncio.gather(*(call() for call in calls), return_exceptions=True)
    tally.incomplete += sum(isinstance(r, BaseException) for r in results)


def _script(events: int, wait: float) -> str:
    return f"sleep {wait}\n" + "".join(f"progress e{i}\n" for i in range(events)) + "reply done"


async def _edge_run(ports: list[int], gateway: BenchGateway, args: argparse.Namespace) -> Tally:
    import httpx

    tally = Tally()
    tokens = [
        gateway.mint(audience=AUDIENCE, tenant=TENANT, identity=f"s{k}") for k in range(args.tasks)
    ]
    headers = [{"Authorization": f"Bearer {t}", "A2A-Version": "1.0"} for t in tokens]
    task_ids: list[str] = []
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        for k in range(args.tasks):
            params = {
                "tenant": TENANT,
                "message": {
                    "messageId": f"bench-{k}-{time.time_ns()}",
                    "role": "ROLE_USER",
                    "parts": [{"text": _script(args.events, args.wait)}],
                },
                "configuration": {"returnImmediately": True},
            }
            doc = (
                await client.post(
                    f"http://127.0.0.1:{ports[0]}/a2a",
                    json=_rpc("SendMessage", params),
                    headers=headers[k],
                )
            ).json()
            task_ids.append(doc["result"]["task"]["id"])
    calls = [
        (
            lambda j=j: _sse(
                ports[j % 2],
                _rpc("SubscribeToTask", {"tenant": TENANT, "id": task_ids[j % args.tasks]}),
                headers[j % args.tasks],
                _follow(tally),
            )
        )
        for j in range(args.subscribers)
    ]
    await _subscribers(calls, tally)
    return tally


async def _sdk_run(port: int, args: argparse.Namespace) -> Tally:
    tally = Tally()
    first: list[asyncio.Future[str]] = [
        asyncio.get_running_loop().create_future() for _ in range(args.tasks)
    ]
    follow = _follow(tally)

    def starter(k: int) -> Callable[[Any], bool]:
        def on_event(doc: Any) -> bool:
            result = doc.get("result", {})
            if "task" in result and not first[k].done():
                first[k].set_result(result["task"]["id"])
            return follow(doc)

        return on_event

    async def start(k: int) -> None:
        message = {"messageId": f"sdk-{k}", "role": "ROLE_USER", "parts": [{"text": "go"}]}
        await _sse(
            port,
            _rpc("SendStreamingMessage", {"message": message}),
            {"A2A-Version": "1.0"},
            starter(k),
        )

    async def subscribe(j: int) -> None:
        task_id = await first[j % args.tasks]
        await _sse(port, _rpc("SubscribeToTask", {"id": task_id}), {"A2A-Version": "1.0"}, follow)

    calls: list[Callable[[], Any]] = [lambda k=k: start(k) for k in range(args.tasks)]
    calls += [lambda j=j: subscribe(j) for j in range(args.subscribers - args.tasks)]
    await _subscribers(calls, tally)
    return tally


def _edge(args: argparse.Namespace, log_dir: Path, gateway: BenchGateway) -> str:
    dbs = pg.Databases()
    procs_started: list[Proc] = []
    try:
        database = dbs.create("stream")
        config = EdgeConfig(gateway_origins=[gateway.origin])
        config.migrate(database)
        procs.run_checked(
            [
                str(VENV_BIN / "looping-edge"),
                "tenants",
                "add",
                TENANT,
                "--manifest",
                str(MANIFEST),
                "--agent",
                "scripted",
                "--require-push-config",
                "false",
            ],
            env=config.env(database),
            what="tenants add",
        )
        limits = {
            "EDGE_STREAM_MAX_PER_IDENTITY": str(args.subscribers),
            "EDGE_STREAM_MAX_PER_PROCESS": str(args.subscribers),
            "EDGE_MAX_CONNECTIONS": str(args.subscribers + 100),
        }
        a = config.serve("edge-a", database, log_dir, background=False, **limits)
        procs_started.append(a)
        b = config.serve("edge-b", database, log_dir, background=True, **limits)
        procs_started.append(b)
        tally = asyncio.run(_edge_run([a.port or 0, b.port or 0], gateway, args))
        return tally.line("edge (2 processes, PostgreSQL)", args.subscribers)
    finally:
        for proc in procs_started:
            proc.stop()
        dbs.drop_all()


def _sdk(args: argparse.Namespace, log_dir: Path) -> str:
    env = {"BENCH_STREAM_WAIT": str(args.wait), "BENCH_STREAM_EVENTS": str(args.events)}
    server = uvicorn_server("sdk-stream", "bench.sdk_stream_server:app", log_dir, env=env)
    try:
        tally = asyncio.run(_sdk_run(server.port or 0, args))
        return tally.line("a2a-sdk server (1 process, in memory)", args.subscribers)
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.streaming")
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--wait", type=float, default=8.0)
    parser.add_argument("--only", choices=["edge", "sdk"], default=None)
    args = parser.parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    lines = []
    if args.only in (None, "edge"):
        gateway = BenchGateway()
        gateway.start()
        try:
            lines.append(_edge(args, log_dir, gateway))
        finally:
            gateway.stop()
    if args.only in (None, "sdk"):
        lines.append(_sdk(args, log_dir))
    print("\n".join(lines))
    print(f"logs: {log_dir}")


if __name__ == "__main__":
    main()
