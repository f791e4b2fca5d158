"""The streaming benchmark's load generator (``bench/streaming.py``): the same client for both
servers. Per task one ``SendMessage`` with ``returnImmediately``, then ``--subscribers /
--tasks`` ``SubscribeToTask`` streams on it, each a raw asyncio connection reading SSE lines;
every status update with a message (the agent's) is counted with its size and its latency
(arrival - the status timestamp its writer stored).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx


@dataclass(frozen=True)
class Shape:
    """One workload, the same for both servers."""

    subscribers: int
    tasks: int
    events: int
    wait: float

    @property
    def per_task(self) -> int:
        return self.subscribers // self.tasks


@dataclass
class Tally:
    """What the subscribers received."""

    latencies: list[float] = field(default_factory=list)
    first_write: float = float("inf")
    last_write: float = 0.0
    last_arrival: float = 0.0
    delivered: int = 0
    data_bytes: int = 0
    incomplete: int = 0
    # The streaming process's CPU seconds so far (``probe``), read at the first event: the
    # CPU spent after it is the delivery's, past the subscribers' connecting.
    probe: Callable[[], float] = lambda: 0.0
    cpu_at_first: float = float("nan")

    last_open: float = 0.0

    def event(self, result: dict[str, Any], arrived: float, size: int) -> bool:
        """Count one event; True when it ends the stream."""
        update = result.get("statusUpdate")
        if update is None:
            if "task" in result:  # the stream's first event: it is open
                self.last_open = max(self.last_open, arrived)
            return False
        status = update["status"]
        if "message" not in status:
            return False  # the edge's worker marking the task WORKING before its first step
        written = datetime.fromisoformat(status["timestamp"].replace("Z", "+00:00")).timestamp()
        if not self.delivered:
            self.cpu_at_first = self.probe()
        self.delivered += 1
        self.data_bytes += size
        self.latencies.append(arrived - written)
        self.first_write = min(self.first_write, written)
        self.last_write = max(self.last_write, written)
        self.last_arrival = max(self.last_arrival, arrived)
        return bool(status["state"] != "TASK_STATE_WORKING")

    @property
    def window(self) -> float:
        return self.last_arrival - self.first_write

    @property
    def rate(self) -> float:
        return self.delivered / self.window if self.window > 0 else float("nan")

    def latency_ms(self, quantile: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        if quantile == 0.5:
            return statistics.median(ordered) * 1000
        return ordered[max(int(len(ordered) * quantile) - 1, 0)] * 1000

    def summary(self) -> dict[str, float]:
        return {
            "delivered": self.delivered,
            "cut_short": self.incomplete,
            "events_per_s": self.rate,
            "window_s": self.window,
            "producer_s": self.last_write - self.first_write,
            # Positive: every stream was open before the first write (the turn's wait was long
            # enough); negative: some were still connecting while events went out.
            "open_lead_s": self.first_write - self.last_open,
            "p50_ms": self.latency_ms(0.5),
            "p99_ms": self.latency_ms(0.99),
            "event_bytes": self.data_bytes / self.delivered if self.delivered else float("nan"),
        }


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def sse(
    port: int, body: dict[str, Any], headers: dict[str, str], on_event: Callable[[Any, int], bool]
) -> None:
    """One SSE call on a raw connection; ``on_event`` gets each JSON-RPC response and its
    size, and says when the stream is done."""
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
            if line.startswith(b"data: ") and on_event(json.loads(line[6:]), len(line) - 7):
                return
        raise ConnectionError("stream ended early")
    finally:
        writer.close()


def follow(tally: Tally) -> Callable[[Any, int], bool]:
    def on_event(doc: Any, size: int) -> bool:
        if "error" in doc:
            raise RuntimeError(f"stream refused: {doc['error']}")
        return tally.event(doc["result"], time.time(), size)

    return on_event


async def start_tasks(
    port: int, messages: list[dict[str, Any]], headers: list[dict[str, str]], tenant: str | None
) -> list[str]:
    """One ``SendMessage`` (``returnImmediately``) per message; the task ids."""
    ids = []
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        for message, head in zip(messages, headers, strict=True):
            params: dict[str, Any] = {
                "message": message,
                "configuration": {"returnImmediately": True},
            }
            if tenant is not None:
                params["tenant"] = tenant
            answer = await client.post(
                f"http://127.0.0.1:{port}/a2a", json=rpc("SendMessage", params), headers=head
            )
            ids.append(answer.json()["result"]["task"]["id"])
    return ids


async def subscribe_all(
    port: int,
    task_ids: list[str],
    headers: list[dict[str, str]],
    shape: Shape,
    tenant: str | None,
    probe: Callable[[], float],
) -> Tally:
    """``shape.per_task`` SubscribeToTask streams on each task, all at once, to the end."""
    tally = Tally(probe=probe)
    on_event = follow(tally)
    calls = []
    for j in range(shape.per_task * shape.tasks):
        k = j % shape.tasks
        params: dict[str, Any] = {"id": task_ids[k]}
        if tenant is not None:
            params["tenant"] = tenant
        calls.append(sse(port, rpc("SubscribeToTask", params), headers[k], on_event))
    results = await asyncio.gather(*calls, return_exceptions=True)
    tally.incomplete += sum(isinstance(r, BaseException) for r in results)
    return tally


async def run_streams(
    port: int,
    messages: list[dict[str, Any]],
    headers: list[dict[str, str]],
    shape: Shape,
    probe: Callable[[], float],
    tenant: str | None = None,
) -> Tally:
    """The whole workload on the server at ``port``; ``probe`` reads its CPU seconds."""
    task_ids = await start_tasks(port, messages, headers, tenant)
    return await subscribe_all(port, task_ids, headers, shape, tenant, probe)
