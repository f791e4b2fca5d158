"""Hostile clients for benchmark 7, in a process of their own (loopback only, bounded in time).

``python -m bench.attack slow --port P --connections 300 --seconds S --token T``
    keeps ``connections`` slow connections open for ``S`` seconds, a third of each kind:
    idle (nothing sent), a head sent one byte every 5 s, and a valid token's head sent at once
    followed by a body one byte every 5 s. A connection the server closes is opened again.

``python -m bench.attack flood --port P --connections 10 --seconds S``
    ``connections`` connections each sending one unterminated header line as fast as the
    server takes it, reconnecting when closed.

Prints ``BENCH_JSON {"opened": …, "closed_by_server": …, "bytes_sent": …}`` when done.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from dataclasses import asdict, dataclass

DRIP_SECONDS = 5.0
SLOW_HEAD = b"POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"


@dataclass
class Tally:
    opened: int = 0
    closed_by_server: int = 0
    bytes_sent: int = 0


async def _closed(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass


async def _slow_once(port: int, kind: int, token_head: bytes, tally: Tally) -> None:
    """One slow connection of ``kind`` (0 idle, 1 slow head, 2 slow body) until closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    tally.opened += 1
    closed = asyncio.ensure_future(_closed(reader))
    first, drip = {0: (b"", b""), 1: (b"", SLOW_HEAD), 2: (token_head, b"{" * 1000)}[kind]
    try:
        writer.write(first)
        tally.bytes_sent += len(first)
        for byte in drip:
            if closed.done():
                break
            writer.write(bytes([byte]))
            tally.bytes_sent += 1
            await asyncio.wait({closed}, timeout=DRIP_SECONDS)
        await closed
        tally.closed_by_server += 1
    except ConnectionError:
        tally.closed_by_server += 1
    finally:
        closed.cancel()
        writer.close()


async def _flood_once(port: int, tally: Tally) -> None:
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    tally.opened += 1
    chunk = b"a" * 65536
    try:
        writer.write(b"POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Flood: ")
        while True:
            writer.write(chunk)
            await writer.drain()
            tally.bytes_sent += len(chunk)
    except ConnectionError:
        tally.closed_by_server += 1
    finally:
        writer.close()


async def _keep_open(args: argparse.Namespace, tally: Tally) -> None:
    token_head = (
        f"POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {args.token}\r\n"
        "A2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ).encode()

    async def slot(k: int) -> None:
        while True:
            with contextlib.suppress(OSError):
                if args.kind == "slow":
                    await _slow_once(args.port, k % 3, token_head, tally)
                else:
                    await _flood_once(args.port, tally)
            await asyncio.sleep(0.05)

    tasks = [asyncio.ensure_future(slot(k)) for k in range(args.connections)]
    await asyncio.sleep(args.seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.attack")
    p.add_argument("kind", choices=("slow", "flood"))
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--connections", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--token", default="")
    args = p.parse_args()
    tally = Tally()
    started = time.monotonic()
    asyncio.run(_keep_open(args, tally))
    doc = {**asdict(tally), "seconds": time.monotonic() - started}
    print("BENCH_JSON " + json.dumps(doc), flush=True)


if __name__ == "__main__":
    main()
