"""CancelTask (CONTRACT §5, §6, §7)."""

from __future__ import annotations

from sqlalchemy import select

from app.db.models import PushOutboxRow, TurnRow
from app.db.outbox import CANCELED as OUTBOX_CANCELED
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.tasks.turn_writes import TurnWrites
from app.testing.edge import EdgeHarness
from tests.tasks.conftest import SCOPE, count, hold_lease, rpc_error, send_params


async def test_cancel_submitted_task(edge: EdgeHarness):
    task = (await edge.result("SendMessage", send_params()))["task"]
    canceled = await edge.result("CancelTask", {"id": task["id"]})
    # The bare Task, not wrapped.
    assert canceled["id"] == task["id"]
    assert canceled["status"]["state"] == states.CANCELED
    async with edge.services.db.transaction() as session:
        turn = (await session.execute(select(TurnRow))).scalar_one()
    assert turn.status == states.TURN_CANCELED
    # Nothing is queued for the cancel itself.
    assert await count(edge.services.db, PushOutboxRow) == 0


async def test_cancel_is_idempotent_on_canceled(edge: EdgeHarness):
    task = (await edge.result("SendMessage", send_params()))["task"]
    first = await edge.result("CancelTask", {"id": task["id"]})
    second = await edge.result("CancelTask", {"id": task["id"]})
    assert second["status"] == first["status"]  # unchanged, same timestamp


async def test_cancel_of_other_terminal_is_refused(edge: EdgeHarness):
    db = edge.services.db
    writes = TurnWrites(db, edge.settings)
    for outcome_state in (states.COMPLETED, states.FAILED, states.REJECTED):
        task = (await edge.result("SendMessage", send_params("m-" + outcome_state)))["task"]
        fence = await hold_lease(db)
        assert await writes.mark_working(SCOPE, task["id"], fence)
        assert await writes.finish(SCOPE, task["id"], fence, TurnOutcome(outcome_state, "x"))
        error = rpc_error(await edge.rpc("CancelTask", {"id": task["id"]}))
        assert error["code"] == -32002
        got = await edge.result("GetTask", {"id": task["id"]})
        assert got["status"]["state"] == outcome_state


async def test_cancel_working_task_drops_undelivered_pushes(edge: EdgeHarness):
    db = edge.services.db
    writes = TurnWrites(db, edge.settings)
    task = (await edge.result("SendMessage", send_params()))["task"]
    fence = await hold_lease(db)
    assert await writes.mark_working(SCOPE, task["id"], fence)
    assert await writes.record_progress(SCOPE, task["id"], fence, step_key="s1", text="half")
    canceled = await edge.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == states.CANCELED
    async with db.transaction() as session:
        statuses = (await session.execute(select(PushOutboxRow.status))).scalars().all()
    assert statuses == [OUTBOX_CANCELED]
    # The running turn's next writes are refused: no terminal state, no push after cancel.
    assert not await writes.finish(SCOPE, task["id"], fence, TurnOutcome(states.COMPLETED, "ok"))
    assert await count(db, PushOutboxRow) == 1


async def test_cancel_interrupted_task(edge: EdgeHarness):
    db = edge.services.db
    writes = TurnWrites(db, edge.settings)
    task = (await edge.result("SendMessage", send_params()))["task"]
    fence = await hold_lease(db)
    assert await writes.mark_working(SCOPE, task["id"], fence)
    assert await writes.finish(SCOPE, task["id"], fence, TurnOutcome(states.INPUT_REQUIRED, "?"))
    canceled = await edge.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == states.CANCELED


async def test_cancel_unknown_and_bad_params(edge: EdgeHarness):
    assert rpc_error(await edge.rpc("CancelTask", {"id": "missing"}))["code"] == -32001
    assert rpc_error(await edge.rpc("CancelTask", {}))["code"] == -32602
