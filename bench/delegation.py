"""The cost of a delegated round (issue 50, "Done when"), against the fake model server in a
process of its own, on PostgreSQL through the whole edge (SendMessage, the worker's claim, the
round's rows, the subagents, every progress write, the outcome):

1. **Edge overhead per subtask** with a model that answers at once: turns of one round of
   ``N`` subtasks (the host delegates, ``N`` subagents answer in text, the host replies), for
   ``N`` = 1 and 8, each turn from a new caller. The baseline runs the same model calls bare
   (``pydantic_ai.direct.model_request``: the host's call, ``N`` concurrent calls, the host's
   call) in this process. The overhead per subtask is the edge's marginal time per subtask
   less the bare calls' marginal time per subtask.
2. **A round of 8 subtasks with a slow model** (``--model-seconds``, each call): a turn is
   three model latencies when the subagents run at once (delegate, the subagents, reply) and
   ten when they run one after another; the time is reported against both.

Run: ``python -m bench.delegation [--turns 10] [--runs 3] [--model-seconds 0.5]``
(``BENCH_PG_DSN`` names the PostgreSQL server, as for ``bench/run``). A fresh database is
created and dropped; the medians of ``--runs`` runs are printed as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
from openai import AsyncOpenAI
from pydantic_ai.direct import model_request
from pydantic_ai.messages import ModelRequest, SystemPromptPart, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from sqlalchemy import func, select

from app.db.migrate import upgrade_to_head
from app.db.models import SubtaskRow, TaskRow
from app.testing.edge import edge_harness
from app.testing.fake_model import FakeModelServer, Recorded, Step, text, tool_call
from bench.pg import Databases, sqlalchemy_url

POLICY = {
    "round_contract": "Call final_reply or delegate; types: {types}; at most {max_subtasks}.",
    "final_round_note": "Reply now.",
    "task_failed": "failed",
    "recovered_reply": "working",
    "partial_note": "partial",
}


class RoundFake(FakeModelServer):
    """Answers by what is asked: the host delegates ``subtasks`` subtasks, then replies once
    the results are back; a subagent (no control tools) answers in text. Every answer takes
    ``delay`` seconds. Nothing is recorded (a long run would only grow)."""

    def __init__(self, subtasks: int, delay: float) -> None:
        super().__init__()
        work = [{"type": "work", "prompt": f"part {i}"} for i in range(subtasks)]
        self._delegate = tool_call("delegate", {"reply": "on it", "subtasks": work}, delay=delay)
        self._final = tool_call("final_reply", {"text": "done"}, delay=delay)
        self._answer = text("result", delay=delay)

    def _next(self, recorded: Recorded) -> Step | None:
        names = [t["function"]["name"] for t in recorded.body.get("tools") or []]
        if "final_reply" not in names:
            return self._answer
        last = (recorded.body.get("messages") or [{}])[-1]
        return self._final if last.get("role") == "tool" else self._delegate


@contextmanager
def external_fake(subtasks: int, delay: float) -> Iterator[str]:
    argv = [sys.executable, "-m", "bench.delegation", "--serve-fake", str(subtasks), str(delay)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def serve_fake(subtasks: int, delay: float) -> None:
    fake = RoundFake(subtasks, delay).start()
    print(fake.base_url, flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    fake.stop()


def agent_config(base_url: str) -> dict[str, Any]:
    return {
        "model": {"base_url": base_url, "name": "fake"},
        "system_prompt": "You run the benchmark.",
        "delegation": {
            "recipes": [{"key": "work", "system_prompt": "You do one part."}],
            "policy": POLICY,
        },
    }


async def bare_turns(base_url: str, subtasks: int, turns: int) -> float:
    """Seconds per turn of the same model calls without the edge."""
    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    model = OpenAIChatModel("fake", provider=OpenAIProvider(openai_client=client))
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    control = ModelRequestParameters(
        function_tools=[ToolDefinition(name=n) for n in ("final_reply", "delegate")]
    )
    host = [ModelRequest(parts=[SystemPromptPart("You run the benchmark."), UserPromptPart("go")])]
    sub = [ModelRequest(parts=[SystemPromptPart("You do one part."), UserPromptPart("part")])]
    started = time.perf_counter()
    for _ in range(turns):
        await model_request(model, host, model_request_parameters=control)
        await asyncio.gather(*(model_request(model, sub) for _ in range(subtasks)))
        await model_request(model, host, model_request_parameters=control)
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed / turns


def _registry(db_url: str) -> Any:
    from app.agents.llm.runtime import LlmRuntime
    from app.agents.registry import default_registry
    from app.db.engine import Database

    storage = Database(db_url).storage
    runtime = LlmRuntime(
        environ={},
        failure_text="failed",
        sessions=storage.sessions,
        subtasks=storage.subtasks,
        http_client=httpx2.AsyncClient(trust_env=False),
    )
    return default_registry(runtime)


async def _completed(edge: Any, task_id: str) -> None:
    query = select(TaskRow.state).where(TaskRow.id == task_id)
    while True:
        await asyncio.sleep(0.005)
        async with edge.services.db.transaction() as session:
            state = (await session.execute(query)).scalar_one()
        if state == "TASK_STATE_COMPLETED":
            return
        assert state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), state


async def _round_seconds(edge: Any, task_id: str) -> float:
    """From the round's rows written to the last subtask's outcome (the database's clock)."""
    query = select(func.min(SubtaskRow.created_at), func.max(SubtaskRow.updated_at)).where(
        SubtaskRow.task_id == task_id
    )
    async with edge.services.db.transaction() as session:
        first, last = (await session.execute(query)).one()
    return float((last - first).total_seconds())


async def edge_turns(
    db_url: str, base_url: str, turns: int, tag: str, rounds: list[float] | None = None
) -> float:
    """Seconds per delegated turn through the edge, a new caller each turn; ``rounds`` gets
    each turn's round time (rows written to the last outcome)."""
    knobs = {"blocking_timeout_seconds": 60}
    async with edge_harness(db_url, background=True, agents=_registry(db_url), **knobs) as edge:
        tenant = f"d{tag}"
        config = agent_config(base_url)
        await edge.add_tenant(tenant, agent="llm", agent_config=config, require_push_config=False)
        started = time.perf_counter()
        for n in range(turns):
            caller = {"key": f"caller-{tag}-{n}", "kind": "user"}
            message = {"messageId": f"{tag}-{n}", "role": "ROLE_USER", "parts": [{"text": "go"}]}
            params = {"message": message, "configuration": {"returnImmediately": True}}
            sent = await edge.result("SendMessage", params, tenant=tenant, identity=caller)
            await _completed(edge, sent["task"]["id"])
            if rounds is not None:
                rounds.append(await _round_seconds(edge, sent["task"]["id"]))
        elapsed = time.perf_counter() - started
    return elapsed / turns


def one_run(db_url: str, turns: int, seconds: float, run: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for n in (1, 8):
        with external_fake(n, 0.0) as base_url:
            out[f"bare_{n}"] = asyncio.run(bare_turns(base_url, n, turns))
            out[f"edge_{n}"] = asyncio.run(edge_turns(db_url, base_url, turns, f"{run}x{n}"))
    rounds: list[float] = []
    with external_fake(8, seconds) as base_url:
        out["slow_8"] = asyncio.run(edge_turns(db_url, base_url, 2, f"{run}slow", rounds))
    out["slow_8_round"] = statistics.median(rounds)
    out["overhead_per_subtask"] = (
        out["edge_8"] - out["edge_1"] - out["bare_8"] + out["bare_1"]
    ) / 7
    return out


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-fake":
        serve_fake(int(sys.argv[2]), float(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(prog="python -m bench.delegation")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model-seconds", type=float, default=0.5)
    args = parser.parse_args()
    databases = Databases()
    runs = []
    try:
        db_url = sqlalchemy_url(databases.create("delegation"))
        upgrade_to_head(db_url)
        for run in range(args.runs):
            runs.append(one_run(db_url, args.turns, args.model_seconds, run))
    finally:
        databases.drop_all()
    keys = runs[0].keys()
    medians = {k: statistics.median(r[k] for r in runs) for k in keys}
    ranges = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in keys}
    report = {
        "runs": args.runs,
        "turns_per_run": args.turns,
        "model_seconds": args.model_seconds,
        "loadavg": os.getloadavg(),
        "median_seconds": medians,
        "range_seconds": ranges,
        "slow_8_turn_in_model_latencies": medians["slow_8"] / args.model_seconds,
        "slow_8_round_in_model_latencies": medians["slow_8_round"] / args.model_seconds,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
