"""Benchmark 8: fair worker slots (issue 47, row 3): how long a newcomer waits behind a flood,
against the turn length.

One tenant floods: 24 identities each queue 6 turns of the ``scripted`` agent
(``sleep <turn length>``, then a reply), run by one ``looping-edge worker`` process with the
default settings. Once the flood holds every slot (half a turn after its first turn was
pushed: the first turns end together and their slots are claimed again at once), 3 identities
of another tenant send one turn of the same length each. The row is the longest of their
waits, from the accept answer to the terminal push at the bench's receiver, against the turn
length (ratio = turn length / wait): a newcomer waits for one slot to come free, then for its
own turn, whatever the flood's size. The issue's goal: within 4 s for one-second turns
(ratio 0.25). Each turn length runs on a fresh database.
"""

from __future__ import annotations

import asyncio
import json
import time

from bench import wire
from bench.config import AUDIENCE
from bench.context import Ctx
from bench.procs import Proc
from bench.receiver import PushReceiver
from bench.report import latency_row

NAME = "8 fair worker slots"
FLOOD_TENANT = "flood"
NEWCOMER_TENANT = "calm"
FLOOD_IDENTITIES = 24
FLOOD_TURNS = 6
NEWCOMERS = 3
# The goal: a newcomer's one-second turn is done within 4 s.
GOAL_TURN_SECONDS = 1.0
GOAL_RATIO = 0.25


def _turn_body(tenant: str, push_url: str, message_id: str, seconds: float) -> str:
    return wire.rpc(
        "SendMessage",
        {
            "tenant": tenant,
            "message": {
                "messageId": message_id,
                "role": "ROLE_USER",
                "parts": [{"text": f"sleep {seconds:g}\nreply done"}],
            },
            "configuration": {
                "returnImmediately": True,
                "taskPushNotificationConfig": {"url": push_url, "token": "bench-push-token"},
            },
        },
    )


async def _send(ctx: Ctx, edge: Proc, tenant: str, who: str, body: str) -> str:
    token = ctx.gateway.mint(audience=AUDIENCE, tenant=tenant, identity=who)
    doc = await asyncio.to_thread(ctx.rpc, edge, token, body)
    task_id = doc.get("result", {}).get("task", {}).get("id")
    if not task_id:
        raise RuntimeError(f"SendMessage failed: {json.dumps(doc)[:300]}")
    return str(task_id)


async def _newcomers_wait(ctx: Ctx, edge: Proc, seconds: float) -> float:
    """The flood, then the newcomers once it holds every slot: their longest wait, in s."""
    receiver = PushReceiver()
    receiver.port = ctx.receiver_port
    await receiver.start()
    try:
        flood = []
        for n in range(FLOOD_TURNS):
            for i in range(FLOOD_IDENTITIES):
                body = _turn_body(FLOOD_TENANT, receiver.url, f"f{i}-{n}", seconds)
                flood.append(await _send(ctx, edge, FLOOD_TENANT, f"f{i}", body))
        await asyncio.wait_for(receiver.wait_terminal(flood[0]), 60.0)
        # The flood's first turns end together and their slots are claimed again at once:
        # arrive half a turn later, when every slot is busy.
        await asyncio.sleep(seconds / 2)

        async def newcomer(k: int) -> float:
            body = _turn_body(NEWCOMER_TENANT, receiver.url, f"n{k}", seconds)
            task_id = await _send(ctx, edge, NEWCOMER_TENANT, f"n{k}", body)
            accepted = time.time()
            pushed = await asyncio.wait_for(receiver.wait_terminal(task_id), 120.0)
            return pushed - accepted

        waits = await asyncio.gather(*(newcomer(k) for k in range(NEWCOMERS)))
        return max(waits)
    finally:
        await receiver.stop()


def run(ctx: Ctx) -> None:
    lengths = (1.0,) if ctx.profile.name == "quick" else (1.0, 2.0)
    for seconds in lengths:
        db = ctx.fresh_edge_database(f"fair{seconds:g}")
        ctx.edge.add_tenants(db, [FLOOD_TENANT, NEWCOMER_TENANT], agent="scripted")
        with ctx.running(
            ctx.edge.serve(f"edge-fair-{seconds:g}", db, ctx.run_dir, background=False)
        ) as edge:
            worker = ctx.edge.worker(f"worker-fair-{seconds:g}", db, ctx.run_dir)
            ctx.procs.append(worker)
            try:
                time.sleep(1.0)  # let the worker connect and LISTEN
                wait = asyncio.run(_newcomers_wait(ctx, edge, seconds))
            finally:
                worker.stop()
                ctx.procs.remove(worker)
        metric = (
            f"newcomer wait (longest of {NEWCOMERS}), {seconds:g} s turns behind "
            f"{FLOOD_IDENTITIES} x {FLOOD_TURNS} queued"
        )
        goal = GOAL_RATIO if seconds == GOAL_TURN_SECONDS else None
        ctx.report.add(latency_row(NAME, metric, wait, "s", "turn length", seconds, goal))
