"""Fallback load generator when ``wrk`` is unavailable: closed-loop HTTP/1.1 keep-alive
clients in up to two processes (asyncio streams, no HTTP library on the hot path).

Same contract as ``lua/pool.lua``: pool file of ``<token>\\t<body>`` lines, ``@@N@@`` made
unique per request, a good answer is HTTP 200 with a JSON-RPC ``result``; prints one line
``BENCH_JSON {...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any, cast


def _load(path: str) -> list[tuple[bytes, str]]:
    items = []
    with open(path) as f:
        for line in f:
            token, _, body = line.rstrip("\n").partition("\t")
            items.append((f"Bearer {token}".encode(), body))
    return items


async def _client(
    port: int,
    path: str,
    items: list[tuple[bytes, str]],
    start: int,
    tag: str,
    deadline: float,
    stats: dict[str, list[float] | int],
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    idx, counter = start % len(items), 0
    lat: list[float] = stats["lat"]  # type: ignore[assignment]
    try:
        while time.perf_counter() < deadline:
            auth, body_text = items[idx]
            idx += 1
            if idx == len(items):
                idx = 0
                stats["wraps"] = cast(int, stats["wraps"]) + 1
            if "@@N@@" in body_text:
                counter += 1
                body_text = body_text.replace("@@N@@", f"{tag}-{counter}")
            body = body_text.encode()
            head = (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nA2A-Version: 1.0\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            ).encode()
            t0 = time.perf_counter()
            writer.write(head + b"Authorization: " + auth + b"\r\n\r\n" + body)
            status_head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in status_head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:].strip())
            answer = await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            stats["requests"] = cast(int, stats["requests"]) + 1
            if not status_head.startswith(b"HTTP/1.1 200") or b'"result"' not in answer:
                stats["bad"] = cast(int, stats["bad"]) + 1
    finally:
        writer.close()


async def _worker(args: argparse.Namespace) -> dict[str, object]:
    items = _load(args.file)
    stats: dict[str, list[float] | int] = {"lat": [], "requests": 0, "bad": 0, "wraps": 0}
    started = time.perf_counter()
    deadline = started + args.seconds
    await asyncio.gather(
        *(
            _client(
                args.port,
                args.path,
                items,
                (args.index * 1000 + c) * 7919,
                f"{args.salt}-{args.index}-{c}",
                deadline,
                stats,
            )
            for c in range(args.connections)
        )
    )
    return {**stats, "seconds": time.perf_counter() - started}


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q / 100 * len(sorted_values)))]


def main() -> int:
    args = _parse_args()
    if args.index >= 0:
        print(json.dumps(asyncio.run(_worker(args))))
        return 0
    children = _start_workers(args)
    results = [json.loads(c.communicate()[0]) for c in children]
    print("BENCH_JSON " + json.dumps(_summary(results)))
    return 0


def _parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--path", default="/a2a")
    p.add_argument("--salt", default="s")
    p.add_argument("--index", type=int, default=-1, help="internal: worker process index")
    return p.parse_args()


def _start_workers(args: argparse.Namespace) -> list[subprocess.Popen[str]]:
    """Up to two worker processes (``--index``), the connections shared out between them."""
    procs = min(2, args.connections)
    share = [
        args.connections // procs + (1 if i < args.connections % procs else 0) for i in range(procs)
    ]
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.pyload",
                "--port",
                str(args.port),
                "--file",
                args.file,
                "--connections",
                str(share[i]),
                "--seconds",
                str(args.seconds),
                "--path",
                args.path,
                "--salt",
                args.salt,
                "--index",
                str(i),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(procs)
    ]


def _summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' results as one, in the ``BENCH_JSON`` shape of ``lua/pool.lua``."""
    lat = sorted(x for r in results for x in r["lat"])
    return {
        "requests": sum(r["requests"] for r in results),
        "duration_us": int(max(r["seconds"] for r in results) * 1e6),
        "p50_us": int(_percentile(lat, 50) * 1e6),
        "p90_us": int(_percentile(lat, 90) * 1e6),
        "p99_us": int(_percentile(lat, 99) * 1e6),
        "mean_us": (sum(lat) / len(lat) * 1e6) if lat else 0.0,
        "bad": sum(r["bad"] for r in results),
        "socket_errors": 0,
        "pool_wraps": sum(r["wraps"] for r in results),
    }


if __name__ == "__main__":
    sys.exit(main())
