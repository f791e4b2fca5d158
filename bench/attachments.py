"""Attachments benchmark (issue 55): documents extracted per second, and the accept latency a
1 MiB image adds next to a text-only turn.

    python -m bench.attachments            # three runs, then the medians

- extraction: the edge's ``PdfExtractor`` (a child process per document, at most two at once,
  the deadline and memory limit of the defaults) reads ``--documents`` one-page PDFs and as
  many 32-page PDFs (the batches alternate which goes first from run to run), each batch
  submitted at once; documents (and pages) per second over the wall time of each batch.
- accept: one ``looping-edge serve --no-worker --no-push`` process on PostgreSQL, an ``echo``
  tenant opted in to images; one connection sends ``--turns`` SendMessage calls of each kind,
  taking turns (text only; the same text and one 1 MiB PNG), each with its own messageId and a
  fresh token, ``returnImmediately``. The bodies are built before the clock starts; the time is
  from the request to the answer. Reported: p50 and p99 of each, the p50 difference (what the
  image adds) and the ratio text / image p50.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.attachments.pdf import PdfExtractor, PdfLimits
from app.testing.pdfs import text_pdf
from bench import pg, procs
from bench.config import AUDIENCE
from bench.gateway import BenchGateway
from bench.procs import VENV_BIN, Proc
from bench.servers import MANIFEST, EdgeConfig

TENANT = "bench"
IMAGE = b"\x89PNG\r\n\x1a\n" + os.urandom(1024 * 1024 - 8)  # 1 MiB, the per-image limit
Figures = dict[str, float]


async def _extract(pdf: bytes, count: int) -> float:
    """Seconds for ``count`` documents submitted at once to one extractor (after one read
    that is not timed: the first child's start)."""
    extractor = PdfExtractor(PdfLimits())
    await extractor.extract(pdf, 0)
    started = time.perf_counter()
    await asyncio.gather(*(extractor.extract(pdf, 0) for _ in range(count)))
    return time.perf_counter() - started


def extraction(count: int, index: int) -> Figures:
    """Both batches, which goes first alternating with the run's ``index``."""
    one = text_pdf(["Invoice 1234: total 42 EUR, due in thirty days."])
    many = text_pdf([f"Page {n}: terms and conditions, clause {n}." for n in range(32)])
    if index % 2 == 0:
        one_s = asyncio.run(_extract(one, count))
        many_s = asyncio.run(_extract(many, count))
    else:
        many_s = asyncio.run(_extract(many, count))
        one_s = asyncio.run(_extract(one, count))
    return {
        "one_page_docs_per_s": count / one_s,
        "32_pages_docs_per_s": count / many_s,
        "32_pages_pages_per_s": 32 * count / many_s,
    }


def _add_tenant(config: EdgeConfig, database: str, log_dir: Path) -> None:
    agent_config = log_dir / "agent.json"
    agent_config.write_text(json.dumps({"attachments": {"images": True}}))
    argv = [str(VENV_BIN / "looping-edge"), "tenants", "add", TENANT, "--manifest", str(MANIFEST)]
    argv += ["--agent", "echo", "--agent-config", str(agent_config)]
    argv += ["--require-push-config", "false"]
    procs.run_checked(argv, env=config.env(database), what="tenants add")


def _body(message_id: str, image: bool) -> bytes:
    parts: list[dict[str, Any]] = [{"text": "what is in this picture?"}]
    if image:
        parts.append({"raw": base64.b64encode(IMAGE).decode(), "mediaType": "image/png"})
    params = {
        "tenant": TENANT,
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": parts},
        "configuration": {"returnImmediately": True},
    }
    doc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    return json.dumps(doc).encode()


async def _turns(port: int, gateway: BenchGateway, turns: int) -> dict[str, list[float]]:
    stamp = time.time_ns()
    plan = [
        (f"{kind}-{n}-{stamp}", kind == "image") for n in range(turns) for kind in ("text", "image")
    ]
    bodies = [(mid, image, _body(mid, image)) for mid, image in plan]
    tokens = [
        gateway.mint(audience=AUDIENCE, tenant=TENANT, identity=f"u{n % 10}")
        for n in range(len(bodies))
    ]
    seconds: dict[str, list[float]] = {"text": [], "image": []}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        for (message_id, image, body), token in zip(bodies, tokens, strict=True):
            headers = {
                "Authorization": f"Bearer {token}",
                "A2A-Version": "1.0",
                "Content-Type": "application/json",
            }
            started = time.perf_counter()
            response = await client.post("/a2a", content=body, headers=headers)
            elapsed = time.perf_counter() - started
            if response.status_code != 200 or "result" not in response.json():
                raise RuntimeError(f"{message_id}: {response.status_code} {response.text[:200]}")
            seconds["image" if image else "text"].append(elapsed)
    return seconds


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def accept(turns: int, log_dir: Path, gateway: BenchGateway) -> Figures:
    dbs = pg.Databases()
    server: Proc | None = None
    try:
        database = dbs.create("attach")
        config = EdgeConfig(gateway_origins=[gateway.origin])
        config.migrate(database)
        _add_tenant(config, database, log_dir)
        # No worker runs the turns: no bound on the identities' queues.
        server = config.serve(
            "edge-attach",
            database,
            log_dir,
            background=False,
            EDGE_MAX_QUEUED_TURNS_PER_IDENTITY="0",
        )
        asyncio.run(_turns(server.port or 0, gateway, 5))  # warm-up, not measured
        seconds = asyncio.run(_turns(server.port or 0, gateway, turns))
    finally:
        if server is not None:
            server.stop()
        dbs.drop_all()
    text_p50, image_p50 = _pct(seconds["text"], 0.5), _pct(seconds["image"], 0.5)
    return {
        "text_p50_ms": text_p50,
        "text_p99_ms": _pct(seconds["text"], 0.99),
        "image_p50_ms": image_p50,
        "image_p99_ms": _pct(seconds["image"], 0.99),
        "added_p50_ms": image_p50 - text_p50,
        "ratio_text_image": text_p50 / image_p50,
    }


def _one_run(index: int, args: argparse.Namespace, log_dir: Path, gateway: BenchGateway) -> Figures:
    load = os.getloadavg()
    print(f"run {index + 1}: load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    figures = extraction(args.documents, index)
    figures.update(accept(args.turns, log_dir, gateway))
    for key, value in figures.items():
        print(f"  {key}: {value:.4g}", flush=True)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.attachments")
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-attach-"))
    gateway = BenchGateway()
    gateway.start()
    runs = []
    try:
        for index in range(args.runs):
            runs.append(_one_run(index, args, log_dir, gateway))
    finally:
        gateway.stop()
    print(f"medians over {len(runs)} runs:")
    for key in runs[0]:
        values = [r[key] for r in runs]
        each = ", ".join(f"{v:.4g}" for v in values)
        print(f"  {key}: {statistics.median(values):.4g} (runs: {each})")
    print(f"logs: {log_dir}")


if __name__ == "__main__":
    main()
