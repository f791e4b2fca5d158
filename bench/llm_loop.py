"""The ``llm`` agent loop's own cost (issue 48, "Done when"), against the fake model server
(``app.testing.fake_model``) on this host:

1. **Steps per second**, one caller at a time: turns of ``--steps`` model steps (tool calls,
   then an answer) through the whole edge (SendMessage, the worker's claim, every step saved
   to the session and pushed as progress on PostgreSQL, the outcome written), next to a bare
   ``pydantic_ai.Agent`` loop running the same turns against the same server in this process.
   Goal: the edge's steps/s >= 0.5x the bare loop's. The model answers at once, so what is
   measured is the loop's overhead. All turns come from one caller, so the edge's model calls
   carry that caller's session (issue 48, point 4, up to its compaction budget); the bare loop
   carries the same conversation (``message_history``, cut back by the same rule), so both
   send the same requests and what differs is the edge. A second row, not a goal, runs the
   edge with a new caller each turn next to a bare loop starting each turn empty.
2. **Slot use**: ``--callers`` callers send one turn each at once, the model taking
   ``--model-seconds`` a call, to a worker with ``--slots`` slots. The ideal time is
   ``ceil(callers / slots) * model_seconds``; goal: done within 1.25x of it.

Run: ``python -m bench.llm_loop [--turns 20] [--steps 5] [--callers 200] [--slots 50]``
(``BENCH_PG_DSN`` names the PostgreSQL server, as for ``bench/run``). A fresh database is
created and dropped. The fake server runs in a process of its own (``bench.llm_fake``), the
same one for both loops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from sqlalchemy import func, select

from app.agents.llm.config import LlmConfig
from app.agents.llm.session import entry_of, estimate_tokens
from app.db.migrate import upgrade_to_head
from app.db.models import TaskRow
from app.testing.edge import edge_harness
from bench.pg import Databases, sqlalchemy_url

STEPS_GOAL = 0.5
SLOTS_GOAL = 1.25


async def noop(ctx: Any, n: int) -> str:
    """Do nothing with n."""
    return f"ok {n}"


class BenchTools:
    key = "bench"
    tools = (noop,)


@contextmanager
def external_fake(steps: int, delay: float = 0.0) -> Iterator[str]:
    """The fake model in its own process (``bench.llm_fake``); yields its base URL."""
    argv = [sys.executable, "-m", "bench.llm_fake", "--steps", str(steps), "--delay", str(delay)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


async def bare_loop(base_url: str, turns: int, steps: int, *, carried: bool = True) -> float:
    """Steps/s of a bare ``pydantic_ai.Agent`` loop with the same tool. ``carried``: the turns
    are one conversation (``message_history``), as the edge's are one caller's session, kept
    within the same token budget the same way (the oldest whole turns out, a summary first);
    otherwise each turn starts empty."""
    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    model = OpenAIChatModel("fake", provider=OpenAIProvider(openai_client=client))
    agent: Agent[None, str] = Agent(model, instructions="You run the benchmark.")

    @agent.tool_plain
    async def noop(n: int) -> str:
        """Do nothing with n."""
        return f"ok {n}"

    budget = LlmConfig.model_fields["session_max_tokens"].default
    session: list[list[ModelMessage]] = []  # one list per turn
    started = time.perf_counter()
    for _ in range(turns):
        history = [m for turn in session for m in turn] if carried else None
        result = await agent.run("go", message_history=history)
        session.append(result.new_messages())
        session = _within_budget(session, budget)
    elapsed = time.perf_counter() - started
    await client.close()
    return turns * steps / elapsed


def _within_budget(session: list[list[ModelMessage]], budget: int) -> list[list[ModelMessage]]:
    """The edge's compaction rule on a bare conversation: past ``budget`` tokens (the same
    estimate), the oldest turns out until at most half of it is left, a summary put first."""
    sizes = [sum(estimate_tokens(entry_of("x", m).message) for m in turn) for turn in session]
    total = sum(sizes)
    if total <= budget:
        return session
    cut = 0
    while cut < len(session) - 1 and total > budget // 2:
        total -= sizes[cut]
        cut += 1
    summary = ModelRequest(parts=[UserPromptPart("an earlier conversation about the benchmark")])
    return [[summary], *session[cut:]]


def _registry(db_url: str) -> Any:
    from app.agents.llm.hitl import ASK_USER_TOOL
    from app.agents.llm.plugins import build_plugins
    from app.agents.llm.runtime import LlmRuntime
    from app.agents.registry import default_registry
    from app.db.engine import Database

    runtime = LlmRuntime(
        environ={},
        failure_text="failed",
        plugins=build_plugins([BenchTools()], {}, builtins=[ASK_USER_TOOL]),
        sessions=Database(db_url).storage.sessions,
        http_client=httpx2.AsyncClient(trust_env=False),
    )
    return default_registry(runtime)


def _send(text_: str, message_id: str, *, wait: bool) -> dict[str, Any]:
    return {
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text_}]},
        "configuration": {"returnImmediately": not wait},
    }


async def _completed(edge: Any, task_id: str, *, every: float) -> None:
    """Wait until the task is COMPLETED, reading its state from the database (one statement)
    every ``every`` seconds: a client's ``GetTask`` polling at that rate (the blocking
    SendMessage's own poll backs off to half a second, which would be measured instead of the
    loop) cost the measured process more than the loop's saves."""
    query = select(TaskRow.state).where(TaskRow.id == task_id)
    while True:
        await asyncio.sleep(every)
        async with edge.services.db.transaction() as session:
            state = (await session.execute(query)).scalar_one()
        if state == "TASK_STATE_COMPLETED":
            return
        assert state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), state


async def edge_loop(
    db_url: str, base_url: str, turns: int, steps: int, *, new_callers: bool = False
) -> float:
    """Steps/s through the whole edge, one turn at a time. All turns come from one caller,
    whose session (issue 48, point 4) every model call carries, up to its compaction budget;
    ``new_callers``: each turn from a caller of its own, so each turn's model calls carry only
    that turn, as the bare loop's do, and what differs between the two is the edge alone."""
    config = {
        "model": {"base_url": base_url, "name": "fake"},
        "system_prompt": "You run the benchmark.",
        "tools": ["noop"],
    }
    # The deployment's poll_seconds: on PostgreSQL the worker wakes on notifications; a short
    # poll only adds the lease keeper's and the push deliverer's reads to the measured process.
    knobs = {"blocking_timeout_seconds": 60}
    async with edge_harness(db_url, background=True, agents=_registry(db_url), **knobs) as edge:
        tenant = "fresh" if new_callers else "bench"
        await edge.add_tenant(tenant, agent="llm", agent_config=config, require_push_config=False)
        started = time.perf_counter()
        for n in range(turns):
            caller = {"key": f"caller-{n}", "kind": "user"} if new_callers else edge.identity
            message = _send("go", f"t-{n}", wait=False)
            sent = await edge.result("SendMessage", message, tenant=tenant, identity=caller)
            await _completed(edge, sent["task"]["id"], every=0.005)
        elapsed = time.perf_counter() - started
    return turns * steps / elapsed


async def slot_use(
    db_url: str, base_url: str, callers: int, slots: int, seconds: float
) -> tuple[float, float]:
    """(elapsed, ideal) seconds for ``callers`` one-step turns sent at once."""
    config = {"model": {"base_url": base_url, "name": "fake"}, "system_prompt": "x"}
    knobs = {"poll_seconds": 0.05, "worker_concurrency": slots}
    async with edge_harness(db_url, background=True, agents=_registry(db_url), **knobs) as edge:
        await edge.add_tenant("slots", agent="llm", agent_config=config, require_push_config=False)
        identities = [{"key": f"caller-{n}", "kind": "user"} for n in range(callers)]

        async def send(n: int) -> None:
            message = _send("go", f"s-{n}", wait=False)
            await edge.result("SendMessage", message, tenant="slots", identity=identities[n])

        started = time.perf_counter()
        await asyncio.gather(*(send(n) for n in range(callers)))
        # Completion is read from the database (one count), not by GetTask from every caller:
        # that polling would cost the measured process more than the turns.
        query = select(func.count()).where(
            TaskRow.tenant == "slots", TaskRow.state == "TASK_STATE_COMPLETED"
        )
        while True:
            async with edge.services.db.transaction() as session:
                if (await session.execute(query)).scalar_one() >= callers:
                    break
            await asyncio.sleep(0.02)
        elapsed = time.perf_counter() - started
    return elapsed, math.ceil(callers / slots) * seconds


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.llm_loop")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--callers", type=int, default=200)
    parser.add_argument("--slots", type=int, default=16)  # EDGE_WORKER_CONCURRENCY
    parser.add_argument("--model-seconds", type=float, default=0.5)
    args = parser.parse_args()
    databases = Databases()
    try:
        db_url = sqlalchemy_url(databases.create("llm"))
        upgrade_to_head(db_url)
        with external_fake(args.steps) as base_url:
            bare = asyncio.run(bare_loop(base_url, args.turns, args.steps))
            bare_fresh = asyncio.run(bare_loop(base_url, args.turns, args.steps, carried=False))
            edge = asyncio.run(edge_loop(db_url, base_url, args.turns, args.steps))
            fresh = asyncio.run(
                edge_loop(db_url, base_url, args.turns, args.steps, new_callers=True)
            )
        with external_fake(1, args.model_seconds) as base_url:
            elapsed, ideal = asyncio.run(
                slot_use(db_url, base_url, args.callers, args.slots, args.model_seconds)
            )
    finally:
        databases.drop_all()
    rows = [
        {
            "metric": "llm steps/s, one caller's session (edge vs bare pydantic_ai.Agent "
            "carrying the same conversation)",
            "value": round(edge, 1),
            "baseline_value": round(bare, 1),
            "ratio": math.floor(edge / bare * 1000) / 1000,
            "goal": STEPS_GOAL,
        },
        {
            # Not a goal: each turn with nothing carried, on both sides.
            "metric": "llm steps/s, a new caller each turn (edge vs bare pydantic_ai.Agent "
            "starting each turn empty)",
            "value": round(fresh, 1),
            "baseline_value": round(bare_fresh, 1),
            "ratio": math.floor(fresh / bare_fresh * 1000) / 1000,
            "goal": None,
        },
        {
            "metric": f"llm slot use ({args.callers} callers, {args.slots} slots, "
            f"{args.model_seconds} s model)",
            "value": round(elapsed, 2),
            "baseline_value": round(ideal, 2),
            "ratio": math.floor(elapsed / ideal * 1000) / 1000,
            "goal": f"<= {SLOTS_GOAL}",
        },
    ]
    for row in rows:
        print(json.dumps(row))
    met = rows[0]["ratio"] >= STEPS_GOAL and elapsed / ideal <= SLOTS_GOAL
    print("goals met" if met else "goal missed")


if __name__ == "__main__":
    main()
