"""Issue 54, "Done when": kill -9 of A's worker while its agent waits on a peer (real
processes, PostgreSQL). After the peer acknowledged (A's send is ``acked``): the worker that
takes the turn over observes the peer's task, B received the message once and A's reply uses
the answer. Before the acknowledgement (the a2a-sdk peer holds it; A's send is still an
``intent``): the model gets ``DELIVERY_UNCERTAIN``, nothing is sent again, and the peer
received the message at most once: against the a2a-sdk peer, which does not deduplicate
message ids (an edge does), so a resubmission would show as a second message; and against edge
B behind a proxy that holds B's answer after B accepted (``tests.peers.proxy``)."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import pytest
from sqlalchemy import text as sql

from app.db.engine import Database
from app.testing.fake_model import text, tool_call
from app.testing.sdk_peer import SdkPeer
from tests.e2e.processes import until
from tests.peers.processes import ASKER, PeerWorld, peer_world, relay, tool_doc, tool_results
from tests.peers.proxy import holding_proxy

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
KNOBS = {"peer_poll_seconds": 0.2, "lease_seconds": 2}
QUESTION = "What is the fare to Lyon?"


async def _sends(url: str) -> list[str]:
    """The statuses of A's recorded sends (``intent``, then ``acked`` with the peer's task)."""
    db = Database(url)
    try:
        async with db.transaction() as session:
            rows = await session.execute(
                sql("SELECT status FROM peer_sends WHERE tenant = :t"), {"t": ASKER}
            )
            return [str(r[0]) for r in rows]
    finally:
        await db.dispose()


async def _kill_worker_once(world: PeerWorld, status: str, received: int = 0) -> None:
    """kill -9 of A's worker once its send is ``status`` (and the a2a-sdk peer holds
    ``received`` messages); another worker takes over."""

    async def reached() -> bool | None:
        if world.sdk is not None and len(world.sdk.received) < received:
            return None
        return True if await _sends(world.url_a) == [status] else None

    await until(reached, *world.a.workers, within=60)
    world.a.workers[0].kill9()
    world.a.start_worker()


async def test_kill_9_after_the_peer_acknowledged(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    async with peer_world(pg_url, second_pg_url, tmp_path, **KNOBS) as world:
        world.fake_b.script(text("The fare is 120 EUR.", delay=6))  # answers after the kill
        send = {"agent": "helper", "text": QUESTION, "wait": True}
        world.fake_a.script(tool_call("a2a_send", send, call_id="s1"), relay("B says: "))
        task_id = await world.ask("Find the fare to Lyon.")
        await _kill_worker_once(world, "acked")
        final = await world.final(task_id, within=120)
        assert final.state == "TASK_STATE_COMPLETED", final.task
        assert final.text == "B says: The fare is 120 EUR."
        [(task, received)] = await world.helper_tasks()
        assert [m["parts"][0]["text"] for m in received] == [QUESTION]  # once
        assert task.state == "TASK_STATE_COMPLETED"
        [result] = tool_results(world.fake_a)
        doc = tool_doc(result)
        assert (doc["ok"], doc["taskId"], doc["state"]) == (True, task.id, "TASK_STATE_COMPLETED")
        assert doc["resumed"] is True  # observed by the worker that took the turn over
        # The model was not asked for the call again: the saved step was re-run, not re-asked.
        assert len(world.fake_a.requests) == 2
        assert await _sends(world.url_a) == ["acked"]


async def test_kill_9_before_the_acknowledgement(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    with SdkPeer(secrets.token_urlsafe(24), ack_delay=120) as sdk:
        async with peer_world(pg_url, second_pg_url, tmp_path, sdk=sdk, **KNOBS) as world:
            send = {"agent": "sdk", "text": QUESTION, "wait": True}
            world.fake_a.script(tool_call("a2a_send", send, call_id="s1"), relay("Outcome: "))
            task_id = await world.ask("Say hello in French.")
            await _kill_worker_once(world, "intent", received=1)  # it reached the peer
            final = await world.final(task_id, within=120)
            assert final.state == "TASK_STATE_COMPLETED", final.task
            assert final.text == "Outcome: DELIVERY_UNCERTAIN"
            [result] = tool_results(world.fake_a)
            doc = tool_doc(result)
            assert (doc["ok"], doc["error"]) == (False, "DELIVERY_UNCERTAIN")
            sdk.acknowledge.set()  # the held answer goes out to nobody
            await asyncio.sleep(1.0)
            assert len(sdk.received) == 1  # never resubmitted
            assert await _sends(world.url_a) == ["intent"]


async def test_kill_9_before_edge_b_answered(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    """The same against edge B behind a proxy that holds B's SendMessage answer: B accepted
    the message (and its agent answers it), A never learned the task id."""
    async with (
        holding_proxy() as proxy,
        peer_world(pg_url, second_pg_url, tmp_path, b_public=proxy.base_url, **KNOBS) as world,
    ):
        proxy.target = world.b.url
        world.fake_b.script(text("The fare is 120 EUR."))
        send = {"agent": "helper", "text": QUESTION, "wait": True}
        world.fake_a.script(tool_call("a2a_send", send, call_id="s1"), relay("Outcome: "))
        task_id = await world.ask("Find the fare to Lyon.")

        async def held() -> bool | None:
            return True if proxy.held == 1 else None

        await until(held, *world.a.workers, within=60)
        await _kill_worker_once(world, "intent")
        final = await world.final(task_id, within=120)
        assert final.text == "Outcome: DELIVERY_UNCERTAIN", final.task
        proxy.release.set()
        [(_task, received)] = await world.helper_tasks()
        assert [m["parts"][0]["text"] for m in received] == [QUESTION]  # once
        assert proxy.held == 1 and await _sends(world.url_a) == ["intent"]
