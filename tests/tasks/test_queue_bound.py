"""The bound on an identity's unfinished new-task turns (issue 47, row 3), on both backends:
past it SendMessage for a new task answers HTTP 429 with Retry-After and a plain-text body
(RFC 6585 §4: a transport-level refusal the gateway retries, never a JSON-RPC error, which
would be final for it); retries of accepted messages and continuations go through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from sqlalchemy import update

from app.db.engine import Database
from app.db.models import TurnRow
from app.errors import TooManyRequests
from app.security.caller import CallerScope
from app.settings import load_settings
from app.tasks import states
from app.tasks.accept import Acceptor, QueueBound
from app.tasks.outcome import TurnOutcome
from app.tasks.push_secrets import PushSecrets
from app.tasks.send_params import parse_send_message
from app.tasks.turn_writes import TurnWrites
from app.tenants.registry import TenantRecord
from app.testing.edge import EdgeHarness, edge_harness
from tests.tasks.conftest import GATEWAY, hold_lease, send_params, turns

USER = CallerScope(tenant="demo", identity="user-1")


@asynccontextmanager
async def bounded_edge(db_url: str, limit: int) -> AsyncIterator[EdgeHarness]:
    settings = {"max_queued_turns_per_identity": limit, "queue_full_retry_after_seconds": 7}
    async with edge_harness(db_url, **settings) as edge:
        await edge.add_tenant("demo")
        yield edge


async def _new(edge: EdgeHarness, message_id: str, who: str = "user-1") -> httpx.Response:
    return await edge.rpc("SendMessage", send_params(message_id), identity={"key": who})


def _task_id(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["result"]["task"]["id"])


def _assert_too_many(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == "7"
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith("too many requests: ")
    assert len(response.text) < 200


async def test_past_the_bound_a_new_task_is_refused_with_429_and_retry_after(
    db_url: str,
) -> None:
    async with bounded_edge(db_url, 3) as edge:
        first = _task_id(await _new(edge, "m-1"))
        for n in (2, 3):
            _task_id(await _new(edge, f"m-{n}"))
        _assert_too_many(await _new(edge, "m-4"))
        assert len(await turns(edge.services.db)) == 3  # the refusal wrote nothing
        # Idempotency first: a retry of an accepted message still gets its task.
        assert _task_id(await _new(edge, "m-1")) == first
        # Another identity has a queue of its own.
        _task_id(await _new(edge, "m-1", who="user-2"))
        # A finished turn frees a place.
        async with edge.services.db.transaction() as s:
            await s.execute(
                update(TurnRow).where(TurnRow.message_id == "m-2").values(status=states.TURN_DONE)
            )
        _task_id(await _new(edge, "m-4"))
        _assert_too_many(await _new(edge, "m-5"))


async def _ask(edge: EdgeHarness, task_id: str, token: int) -> None:
    """What a worker's turn does when the agent asks a question (the turn stays unfinished
    here: only the task's state matters to a continuation)."""
    writes = TurnWrites(edge.services.db, edge.settings)
    fence = await hold_lease(edge.services.db, USER, token=token)
    assert await writes.mark_working(USER, task_id, fence)
    outcome = TurnOutcome(states.INPUT_REQUIRED, "which one?")
    assert await writes.finish(USER, task_id, fence, outcome)


async def test_continuations_are_never_counted_nor_refused(db_url: str) -> None:
    async with bounded_edge(db_url, 2) as edge:
        a = _task_id(await _new(edge, "m-a"))
        await _ask(edge, a, token=1)
        answer_a = send_params("m-a-answer", "the blue one", task_id=a)
        assert _task_id(await edge.rpc("SendMessage", answer_a)) == a
        # The answer's turn is not counted: one new-task turn queued, room for one more.
        b = _task_id(await _new(edge, "m-b"))
        _assert_too_many(await _new(edge, "m-c"))
        # Full, yet the answer to a question gets through.
        await _ask(edge, b, token=2)
        answer_b = send_params("m-b-answer", "the red one", task_id=b)
        assert _task_id(await edge.rpc("SendMessage", answer_b)) == b
        kinds = sorted(t.kind for t in await turns(edge.services.db))
        assert kinds == [states.TURN_RESUME] * 2 + [states.TURN_START] * 2


async def test_concurrent_new_tasks_stop_at_the_bound(db_url: str) -> None:
    async with bounded_edge(db_url, 5) as edge:
        answers = await asyncio.gather(*(_new(edge, f"m-{n}") for n in range(20)))
        codes = sorted(a.status_code for a in answers)
        assert codes == [200] * 5 + [429] * 15, codes
        assert len(await turns(edge.services.db)) == 5


async def test_no_bound_when_the_setting_is_zero(db_url: str) -> None:
    async with bounded_edge(db_url, 0) as edge:
        for n in range(40):
            _task_id(await _new(edge, f"m-{n}"))


@pytest.mark.postgres
async def test_two_processes_overshoot_the_bound_by_at_most_one_turn(pg_url: str) -> None:
    """Two storages on one database stand for two edge processes: each runs its bounded
    accepts of an identity one at a time, but does not see the other's statement in flight
    (the documented limit, ``app.db.postgres.accepts``)."""
    settings = load_settings(gateway_origins=[GATEWAY])
    tenant = TenantRecord(id="demo", manifest={}, require_push_config=False)
    dbs = [Database(pg_url) for _ in range(2)]
    try:
        acceptors = [
            Acceptor(db, PushSecrets(b"x" * 32), QueueBound(5, retry_after_seconds=7)) for db in dbs
        ]

        async def one(n: int) -> bool:
            params = send_params(f"m-{n}", push=False)
            request = parse_send_message(params, tenant=tenant, targets=settings.push_targets)
            try:
                await acceptors[n % 2].accept(USER, request)
            except TooManyRequests:
                return False
            return True

        accepted = sum(await asyncio.gather(*(one(n) for n in range(30))))
        assert 5 <= accepted <= 6, accepted
        assert len(await turns(dbs[0])) == accepted
    finally:
        for db in dbs:
            await db.dispose()
