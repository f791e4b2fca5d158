"""Push-config CRUD (CONTRACT §5, §7): durable, scoped, allowlisted, secrets never returned."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.db.models import PushConfigRow, TaskRow
from app.tasks.push_secrets import PushSecretError, PushSecrets
from app.testing.edge import EdgeHarness
from tests.tasks.conftest import GATEWAY, PUSH_URL, count, rpc_error, send_params


async def _task(edge: EdgeHarness) -> str:
    return str((await edge.result("SendMessage", send_params()))["task"]["id"])


async def test_create_get_list_delete(edge: EdgeHarness):
    task_id = await _task(edge)
    created = await edge.result(
        "CreateTaskPushNotificationConfig",
        {
            "taskId": task_id,
            "id": "second",
            "url": GATEWAY + "/other",
            "token": "tok-2",
            "authentication": {"scheme": "Bearer", "credentials": "s3cret-credential"},
        },
    )
    assert created == {
        "tenant": "demo",
        "id": "second",
        "taskId": task_id,
        "url": GATEWAY + "/other",
        "authentication": {"scheme": "Bearer"},
    }
    got = await edge.result("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "second"})
    assert got == created
    listed = await edge.result("ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert len(listed["configs"]) == 2  # the one from SendMessage and this one
    assert listed["nextPageToken"] == ""
    for config in listed["configs"]:
        assert "token" not in config
        assert "credentials" not in config.get("authentication", {})
    # Secrets at rest are ciphertext that our key decrypts.
    async with edge.services.db.transaction() as session:
        row = (
            await session.execute(select(PushConfigRow).where(PushConfigRow.id == "second"))
        ).scalar_one()
    assert row.auth_credentials_enc and "s3cret" not in row.auth_credentials_enc
    secrets = PushSecrets.from_settings(edge.settings, edge.services.key)
    assert secrets.decrypt(row.auth_credentials_enc) == "s3cret-credential"
    assert secrets.decrypt(row.token_enc or "") == "tok-2"

    params = {"taskId": task_id, "id": "second"}
    assert await edge.result("DeleteTaskPushNotificationConfig", params) == {}
    assert await edge.result("DeleteTaskPushNotificationConfig", params) == {}  # idempotent
    error = rpc_error(await edge.rpc("GetTaskPushNotificationConfig", params))
    assert error["code"] == -32001


async def test_create_replaces_same_id(edge: EdgeHarness):
    task_id = await _task(edge)
    base = {"taskId": task_id, "id": "c"}
    await edge.result("CreateTaskPushNotificationConfig", {**base, "url": PUSH_URL})
    await edge.result("CreateTaskPushNotificationConfig", {**base, "url": GATEWAY + "/new"})
    got = await edge.result("GetTaskPushNotificationConfig", base)
    assert got["url"] == GATEWAY + "/new"


async def test_create_generates_an_id(edge: EdgeHarness):
    task_id = await _task(edge)
    created = await edge.result(
        "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": PUSH_URL}
    )
    assert created["id"]


async def test_create_validation(edge: EdgeHarness):
    task_id = await _task(edge)
    cases = [
        ({"taskId": task_id}, "url"),
        ({"taskId": task_id, "url": "not a url"}, "not a valid URL"),
        ({"taskId": task_id, "url": "https://evil.test/p"}, "allowed gateway origins"),
        ({"taskId": task_id, "url": PUSH_URL, "authentication": {"scheme": "a b"}}, "scheme"),
        ({"url": PUSH_URL}, "taskId"),
    ]
    for params, fragment in cases:
        error = rpc_error(await edge.rpc("CreateTaskPushNotificationConfig", params))
        assert error["code"] == -32602
        assert fragment in error["message"]
    missing = {"taskId": "missing", "url": PUSH_URL}
    assert rpc_error(await edge.rpc("CreateTaskPushNotificationConfig", missing))["code"] == -32001


async def test_list_pages(edge: EdgeHarness):
    task_id = await _task(edge)
    for n in range(4):
        await edge.result(
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": f"cfg-{n}", "url": PUSH_URL},
        )
    seen: list[str] = []
    token = ""
    while True:
        params = {"taskId": task_id, "pageSize": 2, **({"pageToken": token} if token else {})}
        page = await edge.result("ListTaskPushNotificationConfigs", params)
        seen += [c["id"] for c in page["configs"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert len(seen) == 5 and len(set(seen)) == 5
    error = rpc_error(
        await edge.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id, "pageSize": 101})
    )
    assert error["code"] == -32602


@pytest.mark.parametrize("token", ["!!!", "%%", "....", "=", "  ", "AAAA", "a+b/", "A"])
async def test_a_malformed_page_token_is_refused_not_read_as_the_first_page(
    edge: EdgeHarness, token: str
):
    # Found by audit: "!!!" decoded leniently to an empty id and restarted the listing.
    task_id = await _task(edge)
    params = {"taskId": task_id, "pageSize": 2, "pageToken": token}
    error = rpc_error(await edge.rpc("ListTaskPushNotificationConfigs", params))
    assert error["code"] == -32602 and "pageToken" in error["message"]


async def test_a_task_holds_a_bounded_number_of_push_configs(edge: EdgeHarness):
    # Found by audit: 1,004 configs were accepted on one task, and every push of the task
    # goes to each of them. The first config came with SendMessage.
    task_id = await _task(edge)
    for n in range(9):
        await edge.result(
            "CreateTaskPushNotificationConfig", {"taskId": task_id, "id": f"c{n}", "url": PUSH_URL}
        )
    extra = {"taskId": task_id, "id": "one-too-many", "url": PUSH_URL}
    error = rpc_error(await edge.rpc("CreateTaskPushNotificationConfig", extra))
    assert error["code"] == -32602 and "at most 10" in error["message"]
    # Replacing one is still allowed, and a delete makes room.
    again = {"taskId": task_id, "id": "c3", "url": PUSH_URL, "token": "new-token"}
    await edge.result("CreateTaskPushNotificationConfig", again)
    await edge.result("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c3"})
    await edge.result("CreateTaskPushNotificationConfig", extra)
    assert await count(edge.services.db, PushConfigRow) == 10


async def test_continuation_reuses_the_push_config(edge: EdgeHarness):
    from app.tasks import states
    from app.tasks.outcome import TurnOutcome
    from app.tasks.turn_writes import TurnWrites
    from tests.tasks.conftest import SCOPE, hold_lease

    task_id = await _task(edge)
    writes = TurnWrites(edge.services.db, edge.settings)
    fence = await hold_lease(edge.services.db)
    assert await writes.mark_working(SCOPE, task_id, fence)
    assert await writes.finish(SCOPE, task_id, fence, TurnOutcome(states.INPUT_REQUIRED, "?"))
    await edge.result("SendMessage", send_params("m-2", task_id=task_id))
    listed = await edge.result("ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert len(listed["configs"]) == 1  # same url: updated, not doubled


def test_push_secrets():
    a = PushSecrets(b"k" * 32)
    b = PushSecrets(b"j" * 32)
    sealed = a.encrypt("token")
    assert sealed != a.encrypt("token")  # randomised
    assert a.decrypt(sealed) == "token"
    try:
        b.decrypt(sealed)
    except PushSecretError as exc:
        assert "token" not in str(exc)
    else:
        raise AssertionError("decrypted with the wrong key")


@pytest.mark.parametrize("token", [" zqx", "zqx ", "   ", "zqx\n", "zq\r\nX-Injected: 1"])
async def test_a_token_no_http_client_could_send_is_refused_before_any_task(
    edge: EdgeHarness, token: str
) -> None:
    # Leading/trailing spaces (RFC 9110 §5.5) and line breaks: HTTP clients refuse to send
    # them, so the push could never be delivered; a "$" in the check once let "tok\n" through.
    params = send_params(push={"url": PUSH_URL, "token": token})
    response = await edge.rpc("SendMessage", params)
    doc = response.json()
    assert doc["error"]["code"] == -32602, doc
    assert "token" in doc["error"]["message"]
    assert "zq" not in response.text  # a secret is never echoed
    assert await count(edge.services.db, TaskRow) == 0


async def test_a_config_id_with_a_trailing_newline_is_refused(edge: EdgeHarness) -> None:
    task = (await edge.result("SendMessage", send_params()))["task"]
    response = await edge.rpc(
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "id": "cfg\n", "url": PUSH_URL, "token": "t"},
    )
    assert response.json()["error"]["code"] == -32602
