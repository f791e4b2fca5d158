"""Negotiation round trips between two edges (issue 51, "Done when"), on this host.

Two ``looping-edge serve`` processes (HTTP and worker each), each on a fresh PostgreSQL
database with its own key, each listing the other in ``PEER_ORIGINS``; the fake model server
(``bench.negotiation_fake``) answers at once in a process of its own. The gateway asks edge A's
``buyer`` to negotiate with edge B's ``seller``; both negotiators always counter, so each
negotiation runs ``--turns`` round trips (A's negotiator decides, A sends, B's worker has B's
negotiator decide, A reads B's answer, both settle). A negotiation's time is read off A's row:
from its claim (``created_at``) to its last change (``updated_at``), so the gateway turn and
the loop's own model calls are outside it.

**Round trips per second** = turns / that time. **The share spent in the edges** = 1 - (two
model calls per round trip x the median latency of one JSON-mode call to the same fake server
measured from this process) / round-trip time: the model's part is measured as a client sees
it, so the edges' share is, if anything, understated. Median of ``--runs`` negotiations.

Run: ``python -m bench.negotiation [--turns 20] [--runs 3] [--out bench/results/negotiation.md]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.storage import open_storage
from app.security.keys import generate_private_jwk
from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks
from app.testing.tenants import add_tenant_at, open_tenant
from bench.pg import Databases, sqlalchemy_url
from bench.procs import free_port, start


@contextmanager
def fake_model(peer: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.negotiation_fake", "--peer", peer],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def _config(model_url: str, turns: int) -> dict[str, Any]:
    return {
        "model": {"base_url": model_url, "name": "fake"},
        "system_prompt": "You negotiate for the benchmark.",
        "negotiation": {"enabled": True, "max_turns": turns, "negotiator_prompt": "Counter."},
    }


async def _model_latency(model_url: str, calls: int = 50) -> float:
    body = {
        "model": "fake",
        "messages": [{"role": "system", "content": "Counter."}, {"role": "user", "content": "x"}],
        "response_format": {"type": "json_object"},
    }
    seen = []
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(calls):
            began = time.perf_counter()
            await client.post(model_url + "/chat/completions", json=body)
            seen.append(time.perf_counter() - began)
    return statistics.median(seen)


async def _negotiate(kit: GatewayKit, edge_a: str, intent: str) -> None:
    endpoint = edge_a + "/a2a"
    headers = {**kit.bearer(audience=endpoint, tenant="buyer"), "A2A-Version": "1.0"}
    message = {"messageId": intent, "role": "ROLE_USER", "parts": [{"text": intent}]}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"tenant": "buyer", "message": message},
    }
    async with httpx.AsyncClient(trust_env=False, timeout=600) as client:
        doc = (await client.post(endpoint, json=body, headers=headers)).json()
    state = doc.get("result", {}).get("task", {}).get("status", {}).get("state")
    if state != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"the gateway turn ended {state}: {json.dumps(doc)[:500]}")


async def _timed(url_a: str, intent: str, turns: int) -> float:
    db = Database(url_a)
    try:
        rows = await open_storage(db).negotiations.list_for("buyer")
    finally:
        await db.dispose()
    row = next(r for r in rows if r.intent == intent)
    if row.turns != turns or row.verdict != "unanswered":
        raise RuntimeError(f"negotiation ended {row.verdict} after {row.turns} turns")
    async with Database(url_a).engine.connect() as conn:
        from sqlalchemy import text

        found = (
            await conn.execute(
                text(
                    "SELECT extract(epoch FROM updated_at - created_at) "
                    "FROM negotiations WHERE id = :id"
                ),
                {"id": row.id},
            )
        ).scalar()
    return float(found)


_PHASES = (
    ("A: move saved -> B: accepted (token, HTTP, verification, accept)", "a_sent", "b_submitted"),
    ("B: accepted -> B: worker started (wake-up, claim)", "b_submitted", "b_working"),
    ("B: worker started -> B: reply written (negotiator call, saves)", "b_working", "b_replied"),
    (
        "B: reply written -> A: answer saved (blocking wait, read back, settle)",
        "b_replied",
        "a_received",
    ),
    ("A: answer saved -> A: next move saved (negotiator call, saves)", "a_received", "a_next"),
)


async def _phases(url_a: str, url_b: str, intent: str) -> dict[str, float]:
    """Median milliseconds of each phase of a round trip, from the rows' database timestamps
    (both databases on one server: one clock)."""
    from sqlalchemy import text

    async with Database(url_a).engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT t.way, extract(epoch FROM t.created_at), n.task_id FROM "
                    "negotiation_turns t JOIN negotiations n ON n.id = t.negotiation_id "
                    "WHERE n.intent = :intent ORDER BY t.seq"
                ),
                {"intent": intent},
            )
        ).all()
    task_id = rows[0][2]
    async with Database(url_b).engine.connect() as conn:
        events = (
            await conn.execute(
                text(
                    "SELECT status->>'state', extract(epoch FROM created_at) FROM task_events "
                    "WHERE task_id = :task ORDER BY id"
                ),
                {"task": task_id},
            )
        ).all()
    sent = [float(r[1]) for r in rows if r[0] == "sent"]
    received = [float(r[1]) for r in rows if r[0] == "received"]
    marks: dict[str, list[float]] = {
        "a_sent": sent,
        "a_received": received,
        "a_next": sent[1:],
        "b_submitted": [float(e[1]) for e in events if e[0] == "TASK_STATE_SUBMITTED"],
        "b_working": [float(e[1]) for e in events if e[0] == "TASK_STATE_WORKING"],
        "b_replied": [float(e[1]) for e in events if e[0] == "TASK_STATE_INPUT_REQUIRED"],
    }
    out = {}
    for name, first, last in _PHASES:
        pairs = list(zip(marks[first], marks[last], strict=False))
        out[name] = statistics.median((b - a) * 1000 for a, b in pairs) if pairs else 0.0
    return out


async def run(url_a: str, url_b: str, turns: int, runs: int, log_dir: Path) -> dict[str, Any]:
    procs = []
    try:
        port_a, port_b = free_port(), free_port()
        edge_a, edge_b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
        kit = GatewayKit()
        async with serve_jwks(kit):
            with fake_model(edge_b) as model_url:
                config = _config(model_url, turns)
                await add_tenant_at(url_a, open_tenant("buyer", agent="llm", agent_config=config))
                await add_tenant_at(url_b, open_tenant("seller", agent="llm", agent_config=config))
                for name, url, port, peer in (
                    ("edge-a", url_a, port_a, edge_b),
                    ("edge-b", url_b, port_b, edge_a),
                ):
                    env = {
                        "DATABASE_URL": url,
                        "A2A_SIGNING_KEY": json.dumps(generate_private_jwk(name)),
                        "PUBLIC_URL": f"http://127.0.0.1:{port}",
                        "GATEWAY_ORIGINS": json.dumps([kit.origin]),
                        "PEER_ORIGINS": json.dumps([peer]),
                        "EDGE_ALLOW_LOOPBACK_HTTP": "true",
                        "EDGE_BLOCKING_TIMEOUT_SECONDS": "600",
                        "EDGE_LOG_LEVEL": "WARNING",
                    }
                    argv = [sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)]
                    procs.append(start(name, argv, env=env, log_dir=log_dir, port=port))
                await _negotiate(kit, edge_a, "warm-up")  # cards, pins, pools, imports
                seconds = []
                for index in range(runs):
                    intent = f"run-{index}"
                    await _negotiate(kit, edge_a, intent)
                    seconds.append(await _timed(url_a, intent, turns))
                model = await _model_latency(model_url)
                phases = await _phases(url_a, url_b, f"run-{runs // 2}")
    finally:
        for proc in procs:
            proc.stop()
    per_trip = [s / turns for s in seconds]
    rates = [1 / t for t in per_trip]
    shares = [1 - 2 * model / t for t in per_trip]
    return {
        "turns": turns,
        "runs": runs,
        "round_trips_per_second": {"median": statistics.median(rates), "runs": rates},
        "round_trip_ms": {
            "median": statistics.median(per_trip) * 1000,
            "runs": [t * 1000 for t in per_trip],
        },
        "model_call_ms": model * 1000,
        "edge_share": {"median": statistics.median(shares), "runs": shares},
        "load_average": os.getloadavg(),
        "phases_ms": phases,
    }


def report(result: dict[str, Any]) -> str:
    rates = result["round_trips_per_second"]
    trips = result["round_trip_ms"]
    shares = result["edge_share"]
    load = ", ".join(f"{x:.2f}" for x in result["load_average"])

    def span(values: list[float], fmt: str) -> str:
        return f"{fmt.format(min(values))} to {fmt.format(max(values))}"

    return "\n".join(
        [
            "# Negotiation round trips between two edges",
            "",
            "`python -m bench.negotiation` (issue 51): two `looping-edge serve` processes on",
            "PostgreSQL, the fake model answering at once; each negotiation runs "
            f"{result['turns']} round trips (both negotiators counter until `max_turns`). "
            f"Median of {result['runs']} negotiations, range in brackets.",
            "",
            "| measure | median | range |",
            "|---|---|---|",
            f"| round trips / s | {rates['median']:.1f} | {span(rates['runs'], '{:.1f}')} |",
            f"| one round trip (ms) | {trips['median']:.1f} | {span(trips['runs'], '{:.1f}')} |",
            f"| share spent in the edges | {shares['median']:.1%} | "
            f"{span(shares['runs'], '{:.1%}')} |",
            f"| one fake model call, seen by a client (ms) | {result['model_call_ms']:.2f} | |",
            "",
            f"Load average at the end of the run: {load} (2-core VM shared with other work).",
            "",
            "Where a round trip goes (median milliseconds per phase of the second negotiation,",
            "from the rows' database timestamps, which are transaction start times: a phase",
            "includes the transaction that ends it). The blocking SendMessage is answered by a",
            "wait that polls the task (first after 20 ms, the pause doubling up to 500 ms), so a",
            "reply is seen up to one pause after it was written; the claim phase is the",
            "worker's wake-up and claim on the other edge:",
            "",
            "| phase | ms |",
            "|---|---|",
            *(f"| {name} | {ms:.1f} |" for name, ms in result["phases_ms"].items()),
            "",
            "A round trip is: A's negotiator call, A's move saved, a signed token minted, the",
            "blocking SendMessage to B (B's accept, B's worker claiming the turn, B's negotiator",
            "call, the reply saved with its turn, the task written), the answer read back,",
            "settlement on both sides and A's row written. The edges' share is",
            "1 - 2 x (one model call) / (one round trip).",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.negotiation")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default="bench/results/negotiation.md")
    args = parser.parse_args()
    databases = Databases()
    try:
        url_a = sqlalchemy_url(databases.create("nego_a"))
        url_b = sqlalchemy_url(databases.create("nego_b"))
        for url in (url_a, url_b):
            upgrade_to_head(url)
        with tempfile.TemporaryDirectory(prefix="bench-nego-") as scratch:
            result = asyncio.run(run(url_a, url_b, args.turns, args.runs, Path(scratch)))
    finally:
        databases.drop_all()
    text = report(result)
    print(text)
    Path(args.out).write_text(text, encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
