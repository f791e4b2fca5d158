"""SendMessage accept path (CONTRACT §5; issue 3 "Accept"; REFERENCE-CASES 44-48, 77)."""

from __future__ import annotations

import asyncio
import re

from sqlalchemy import select

from app.db.models import PushConfigRow, TaskMessageRow, TaskRow, TurnRow
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.tasks.push_secrets import PushSecrets
from app.tasks.turn_writes import TurnWrites
from app.testing.edge import EdgeHarness
from tests.polling import poll_until
from tests.tasks.conftest import PUSH_URL, count, hold_lease, rpc_error, send_params, turns

RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


async def test_accept_answers_submitted_task_wrapped(edge: EdgeHarness):
    result = await edge.result("SendMessage", send_params())
    assert set(result) == {"task"}
    task = result["task"]
    assert set(task) == {"id", "contextId", "status"}
    assert task["status"]["state"] == states.SUBMITTED
    assert RFC3339_Z.match(task["status"]["timestamp"])
    db = edge.services.db
    [turn] = await turns(db)
    assert (turn.task_id, turn.kind, turn.status, turn.attempts) == (
        task["id"],
        states.TURN_START,
        states.TURN_QUEUED,
        0,
    )
    assert turn.not_before is None
    assert turn.payload["message"]["messageId"] == "m-1"
    assert turn.payload["identity"]["key"] == "user-1"
    assert await count(db, TaskMessageRow) == 1


async def test_context_id_kept_when_given_and_long(edge: EdgeHarness):
    context = "ctx-" + "x" * 60
    result = await edge.result("SendMessage", send_params(context_id=context))
    assert result["task"]["contextId"] == context


async def test_push_config_stored_encrypted(edge: EdgeHarness):
    push = {"url": PUSH_URL, "token": "secret-token", "id": "cfg-1"}
    task = (await edge.result("SendMessage", send_params(push=push)))["task"]
    async with edge.services.db.transaction() as session:
        row = (await session.execute(select(PushConfigRow))).scalar_one()
    assert (row.id, row.task_id, row.url) == ("cfg-1", task["id"], PUSH_URL)
    assert row.token_enc is not None and "secret-token" not in row.token_enc
    secrets = PushSecrets.from_settings(edge.settings, edge.services.key)
    assert secrets.decrypt(row.token_enc) == "secret-token"


async def test_retry_returns_same_task_and_starts_nothing(edge: EdgeHarness):
    first = await edge.result("SendMessage", send_params())
    second = await edge.result("SendMessage", send_params())
    assert second["task"]["id"] == first["task"]["id"]
    db = edge.services.db
    assert await count(db, TaskRow) == 1
    assert await count(db, TurnRow) == 1
    assert await count(db, PushConfigRow) == 1


async def test_fifty_concurrent_identical_dispatches(edge: EdgeHarness):
    responses = await asyncio.gather(
        *(edge.rpc("SendMessage", send_params("same"), request_id=i) for i in range(50))
    )
    ids = {r.json()["result"]["task"]["id"] for r in responses}
    assert len(ids) == 1
    db = edge.services.db
    assert await count(db, TaskRow) == 1
    assert await count(db, TurnRow) == 1
    assert await count(db, TaskMessageRow) == 1


async def test_same_message_id_other_content_is_a_conflict(edge: EdgeHarness):
    await edge.result("SendMessage", send_params("m-1", "hello"))
    error = rpc_error(await edge.rpc("SendMessage", send_params("m-1", "другое")))
    assert error["code"] == -32602
    assert "messageId" in error["message"]
    # A different push token is different content too.
    push = {"url": PUSH_URL, "token": "another-token"}
    assert rpc_error(await edge.rpc("SendMessage", send_params(push=push)))["code"] == -32602
    assert await count(edge.services.db, TaskRow) == 1


async def test_retry_after_completion_returns_same_task(edge: EdgeHarness):
    task = (await edge.result("SendMessage", send_params()))["task"]
    db = edge.services.db
    writes = TurnWrites(db, edge.settings)
    scope = _scope()
    fence = await hold_lease(db, scope)
    assert await writes.mark_working(scope, task["id"], fence)
    assert await writes.finish(scope, task["id"], fence, TurnOutcome(states.COMPLETED, "ok"))
    again = (await edge.result("SendMessage", send_params()))["task"]
    assert again["id"] == task["id"]
    assert again["status"]["state"] == states.COMPLETED
    assert await count(db, TurnRow) == 1


async def test_same_message_id_from_other_identity_is_another_task(edge: EdgeHarness):
    a = await edge.result("SendMessage", send_params())
    b = await edge.result("SendMessage", send_params(), identity={"key": "user-2"})
    assert a["task"]["id"] != b["task"]["id"]


async def test_same_message_id_and_identity_under_another_tenant_is_another_task(
    edge: EdgeHarness,
):
    # CONTRACT §5: idempotent on (tenant, identity, messageId): the same identity key and
    # messageId addressed to another tenant is that tenant's own new task, never a replay.
    await edge.add_tenant("other")
    a = await edge.result("SendMessage", send_params())
    b = await edge.result("SendMessage", send_params(), tenant="other")
    assert a["task"]["id"] != b["task"]["id"]
    assert b["task"]["status"]["state"] == states.SUBMITTED
    assert await count(edge.services.db, TurnRow) == 2


async def test_dedupe_off_starts_a_task_per_message(edge: EdgeHarness):
    a = await edge.result("SendMessage", send_params(), tenant="nodedupe")
    b = await edge.result("SendMessage", send_params(), tenant="nodedupe")
    assert a["task"]["id"] != b["task"]["id"]
    assert await count(edge.services.db, TurnRow) == 2


# --- push config validation, before any task exists (REFERENCE-CASES 44-48) ---------------


async def _refused(edge: EdgeHarness, params: dict, pattern: str, **kwargs) -> None:
    response = await edge.rpc("SendMessage", params, request_id=7, **kwargs)
    assert response.status_code == 200
    doc = response.json()
    assert doc["id"] == 7  # REFERENCE-CASES 47
    assert doc["error"]["code"] == -32602
    assert re.search(pattern, doc["error"]["message"]), doc["error"]["message"]
    assert await count(edge.services.db, TaskRow) == 0
    assert await count(edge.services.db, TurnRow) == 0


async def test_missing_push_config(edge: EdgeHarness):
    await _refused(edge, send_params(push=None), r"taskPushNotificationConfig\.url")


async def test_push_config_without_token(edge: EdgeHarness):
    await _refused(edge, send_params(push={"url": PUSH_URL}), r"taskPushNotificationConfig\.token")


async def test_push_url_not_a_url(edge: EdgeHarness):
    push = {"url": "not a url", "token": "t"}
    await _refused(edge, send_params(push=push), r"not a valid URL")


async def test_push_url_outside_allowlist(edge: EdgeHarness):
    for url in (
        "https://evil.test/push",
        "https://gateway.test.evil.test/p",
        "http://gateway.test/p",
    ):
        push = {"url": url, "token": "t"}
        await _refused(edge, send_params(push=push), r"taskPushNotificationConfig\.url")


async def test_push_token_with_newline_refused(edge: EdgeHarness):
    push = {"url": PUSH_URL, "token": "a\r\nX-Evil: 1"}
    await _refused(edge, send_params(push=push), r"taskPushNotificationConfig\.token")


async def test_push_config_not_required_when_tenant_says_so(edge: EdgeHarness):
    # REFERENCE-CASES 48
    params = send_params(push=None, returnImmediately=True)
    result = await edge.result("SendMessage", params, tenant="open")
    assert result["task"]["status"]["state"] == states.SUBMITTED
    # ...but a push config that is given is still checked against the allowlist.
    bad = send_params(push={"url": "https://evil.test/x"}, returnImmediately=True)
    error = rpc_error(await edge.rpc("SendMessage", bad, tenant="open"))
    assert error["code"] == -32602


async def test_message_validation(edge: EdgeHarness):
    cases = [
        ({"messageId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "messageId"),
        ({"role": "ROLE_USER", "parts": [{"text": "x"}]}, "messageId"),
        ({"messageId": "m", "parts": [{"text": "x"}]}, "role"),
        ({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}, "role"),
        ({"messageId": "m", "role": "ROLE_USER", "parts": []}, "parts"),
        ({"messageId": "m", "role": "ROLE_USER", "parts": [{}]}, r"parts\[0\]"),
        ({"messageId": 5, "role": "ROLE_USER", "parts": [{"text": "x"}]}, "messageId"),
        ("a string", "message"),
    ]
    for msg, pattern in cases:
        params = {"message": msg, "configuration": send_params()["configuration"]}
        await _refused(edge, params, pattern)
    await _refused(edge, {"configuration": send_params()["configuration"]}, "message")


# --- continuation ---------------------------------------------------------------------------


def _scope():
    from app.security.caller import CallerScope

    return CallerScope(tenant="demo", identity="user-1")


async def _interrupted(
    edge: EdgeHarness, state: str = states.INPUT_REQUIRED, message_id: str = "m-1"
) -> dict:
    task = (await edge.result("SendMessage", send_params(message_id)))["task"]
    writes = TurnWrites(edge.services.db, edge.settings)
    fence = await hold_lease(edge.services.db, _scope())
    assert await writes.mark_working(_scope(), task["id"], fence)
    assert await writes.finish(_scope(), task["id"], fence, TurnOutcome(state, "which one?"))
    return task


async def test_continuation_resumes_interrupted_task(edge: EdgeHarness):
    for state in (states.INPUT_REQUIRED, states.AUTH_REQUIRED):
        task = await _interrupted(edge, state, message_id="m-start-" + state)
        params = send_params("m-answer-" + state, "the blue one", task_id=task["id"])
        result = (await edge.result("SendMessage", params))["task"]
        assert result["id"] == task["id"]
        assert result["contextId"] == task["contextId"]  # inherited
        assert result["status"]["state"] == states.SUBMITTED
        resume = [t for t in await turns(edge.services.db) if t.task_id == task["id"]][-1]
        assert (resume.kind, resume.status) == (states.TURN_RESUME, states.TURN_QUEUED)
        # A retry of the answer is the same answer, nothing new queued.
        again = (await edge.result("SendMessage", params))["task"]
        assert again["id"] == task["id"]
        assert len([t for t in await turns(edge.services.db) if t.task_id == task["id"]]) == 2
    got = await edge.result("GetTask", {"id": task["id"]})
    assert [m["role"] for m in got["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]


async def test_continuation_rules(edge: EdgeHarness):
    task = await _interrupted(edge)
    # contextId mismatch
    params = send_params("m-2", task_id=task["id"], context_id="other-context")
    assert rpc_error(await edge.rpc("SendMessage", params))["code"] == -32602
    # unknown, foreign (other identity, other tenant) task
    unknown = send_params("m-3", task_id="00000000-0000-0000-0000-000000000000")
    assert rpc_error(await edge.rpc("SendMessage", unknown))["code"] == -32001
    foreign = send_params("m-4", task_id=task["id"])
    error = rpc_error(await edge.rpc("SendMessage", foreign, identity={"key": "user-2"}))
    assert error["code"] == -32001
    long_id = send_params("m-5", task_id="x" * 200)
    assert rpc_error(await edge.rpc("SendMessage", long_id))["code"] == -32001
    # matching contextId is fine
    ok = send_params("m-6", task_id=task["id"], context_id=task["contextId"])
    assert (await edge.result("SendMessage", ok))["task"]["id"] == task["id"]
    # now SUBMITTED again: not waiting for input
    busy = send_params("m-7", task_id=task["id"])
    assert rpc_error(await edge.rpc("SendMessage", busy))["code"] == -32004


async def test_continuation_of_terminal_task(edge: EdgeHarness):
    task = (await edge.result("SendMessage", send_params()))["task"]
    await edge.result("CancelTask", {"id": task["id"]})
    error = rpc_error(await edge.rpc("SendMessage", send_params("m-2", task_id=task["id"])))
    assert error["code"] == -32004
    assert await count(edge.services.db, TurnRow) == 1


# --- blocking mode --------------------------------------------------------------------------


async def test_blocking_waits_for_the_outcome(edge: EdgeHarness):
    db = edge.services.db
    writes = TurnWrites(db, edge.settings)
    scope = _scope().__class__(tenant="open", identity="user-1")

    async def accepted() -> str | None:
        async with db.transaction() as session:
            return (await session.execute(select(TaskRow.id))).scalar_one_or_none()

    async def complete() -> None:
        task_id = await poll_until(accepted, interval=0.01, what="the accepted task")
        fence = await hold_lease(db, scope)
        assert await writes.mark_working(scope, task_id, fence)
        assert await writes.finish(scope, task_id, fence, TurnOutcome(states.COMPLETED, "42"))

    response, _ = await asyncio.gather(
        edge.rpc("SendMessage", send_params(push=None), tenant="open"), complete()
    )
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == states.COMPLETED
    assert task["status"]["message"]["parts"] == [{"text": "42"}]
    assert [m["role"] for m in task["history"]] == ["ROLE_USER", "ROLE_AGENT"]


async def test_blocking_is_bounded(db_url: str):
    from app.testing.edge import edge_harness

    async with edge_harness(db_url, blocking_timeout_seconds=0.2) as harness:
        await harness.add_tenant("open", require_push_config=False)
        params = send_params(push=None)
        params["configuration"] = {"historyLength": 0}
        task = (await harness.result("SendMessage", params, tenant="open"))["task"]
        assert task["status"]["state"] == states.SUBMITTED
        assert "history" not in task


async def test_gateway_tenant_never_blocks(edge: EdgeHarness):
    # returnImmediately absent (false) but the tenant requires push: answer at once.
    result = await edge.result("SendMessage", send_params())
    assert result["task"]["status"]["state"] == states.SUBMITTED
