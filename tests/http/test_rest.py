"""The HTTP+JSON binding (A2A §11) through the real app, on both backends: every route, the
tenant in the path, the token's audience, isolation (another caller's task is a 404
TaskNotFound), streaming over SSE, and every refusal in the binding's own error shape."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.tasks import states
from app.testing.edge import EdgeHarness, edge_harness
from tests.polling import poll_until
from tests.tasks.sse_client import SseCall

OTHER = {"key": "user-2", "name": "Other", "kind": "user"}
FAST = {"poll_seconds": 0.05, "stream_poll_seconds": 0.05, "turn_retry_base_seconds": 0.01}


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(
        db_url, background=True, push_allow_private_targets=True, **FAST
    ) as harness:
        await harness.add_tenant(
            "open", agent="scripted", profile="open", require_push_config=False
        )
        await harness.add_tenant("sibling", agent="scripted", profile="open")
        harness.default_tenant = "open"
        yield harness


def _message(text: str, message_id: str = "m-1", **extra: Any) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **extra}


def _status(response: httpx.Response, code: int, reason: str | None) -> dict[str, Any]:
    """A google.rpc.Status body (A2A §11.6) with this HTTP status and A2A reason."""
    assert response.status_code == code, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and isinstance(error["message"], str) and error["status"]
    if reason is not None:
        [info] = error["details"]
        assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
        assert (info["reason"], info["domain"]) == (reason, "a2a-protocol.org")
    return dict(error)


def _events(response: httpx.Response) -> list[tuple[str | None, dict[str, Any]]]:
    out: list[tuple[str | None, dict[str, Any]]] = []
    name: str | None = None
    for line in response.text.split("\n"):
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            out.append((name, json.loads(line[len("data: ") :])))
            name = None
    return out


async def _send(edge: EdgeHarness, text: str, message_id: str = "m-1", **config: Any) -> Any:
    body: dict[str, Any] = {"message": _message(text, message_id)}
    if config:
        body["configuration"] = config
    return await edge.rest("POST", "/message:send", json=body)


async def _task(edge: EdgeHarness, text: str = "reply done", message_id: str = "m-1") -> str:
    r = await _send(edge, text, message_id, returnImmediately=True)
    assert r.status_code == 200, r.text
    return str(r.json()["task"]["id"])


async def _settled(edge: EdgeHarness, task_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        task = (await edge.rest("GET", f"/tasks/{task_id}")).json()
        return task if task["status"]["state"] in states.TERMINAL else None

    return await poll_until(done, 10, interval=0.02, what="terminal")


# --- the operations -------------------------------------------------------------------------


async def test_send_message_blocks_and_answers_with_the_task(edge: EdgeHarness) -> None:
    r = await _send(edge, "artifact text A\nreply done")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    task = r.json()["task"]
    assert task["status"]["state"] == states.COMPLETED
    assert task["artifacts"][0]["parts"] == [{"text": "A"}]


async def test_send_message_may_answer_with_a_message(edge: EdgeHarness) -> None:
    r = await _send(edge, "message hello")
    assert r.status_code == 200
    assert r.json()["message"]["parts"] == [{"text": "hello"}]


async def test_get_task_with_history_length(edge: EdgeHarness) -> None:
    task_id = await _task(edge)
    await _settled(edge, task_id)
    r = await edge.rest("GET", f"/tasks/{task_id}", params={"historyLength": "0"})
    assert r.status_code == 200
    assert r.json()["id"] == task_id and "history" not in r.json()
    full = (await edge.rest("GET", f"/tasks/{task_id}")).json()
    assert full["history"][0]["parts"] == [{"text": "reply done"}]


async def test_list_tasks_reads_its_query_parameters(edge: EdgeHarness) -> None:
    first = await _task(edge, message_id="m-1")
    second = await _task(edge, message_id="m-2")
    await _settled(edge, first)
    await _settled(edge, second)
    r = await edge.rest("GET", "/tasks", params={"pageSize": "1", "includeArtifacts": "false"})
    assert r.status_code == 200, r.text
    page = r.json()
    assert [t["id"] for t in page["tasks"]] == [second]
    assert page["pageSize"] == 1 and page["totalSize"] == 2 and page["nextPageToken"]
    r = await edge.rest(
        "GET", "/tasks", params={"pageSize": "1", "pageToken": page["nextPageToken"]}
    )
    assert [t["id"] for t in r.json()["tasks"]] == [first]
    done = await edge.rest("GET", "/tasks", params={"status": states.COMPLETED})
    assert len(done.json()["tasks"]) == 2
    working = await edge.rest("GET", "/tasks", params={"status": states.WORKING})
    assert working.json()["tasks"] == []


async def test_list_tasks_refuses_bad_query_values(edge: EdgeHarness) -> None:
    _status(await edge.rest("GET", "/tasks", params={"pageSize": "many"}), 400, "INVALID_PARAMS")
    _status(
        await edge.rest("GET", "/tasks", params={"includeArtifacts": "yes"}), 400, "INVALID_PARAMS"
    )
    _status(await edge.rest("GET", "/tasks", params={"pageSize": "0"}), 400, "INVALID_PARAMS")


async def test_cancel_task_and_a_terminal_task_is_not_cancelable(edge: EdgeHarness) -> None:
    running = await _task(edge, "sleep 5\nreply late")
    r = await edge.rest("POST", f"/tasks/{running}:cancel")
    assert r.status_code == 200, r.text
    assert r.json()["status"]["state"] == states.CANCELED
    done = await _task(edge, message_id="m-2")
    await _settled(edge, done)
    _status(await edge.rest("POST", f"/tasks/{done}:cancel"), 400, "TASK_NOT_CANCELABLE")


async def test_push_config_create_get_list_delete(edge: EdgeHarness) -> None:
    task_id = await _task(edge, "sleep 5\nreply late")
    base = f"/tasks/{task_id}/pushNotificationConfigs"
    config = {"url": "https://hooks.example.com/a2a", "token": "client-token"}
    created = await edge.rest("POST", base, json=config)
    assert created.status_code == 200, created.text
    doc = created.json()
    assert doc["taskId"] == task_id and doc["url"] == config["url"] and doc["id"]
    got = await edge.rest("GET", f"{base}/{doc['id']}")
    assert got.status_code == 200 and got.json()["id"] == doc["id"]
    listed = await edge.rest("GET", base, params={"pageSize": "10"})
    assert [c["id"] for c in listed.json()["configs"]] == [doc["id"]]
    deleted = await edge.rest("DELETE", f"{base}/{doc['id']}")
    assert deleted.status_code == 200 and deleted.json() == {}
    _status(await edge.rest("GET", f"{base}/{doc['id']}"), 404, "TASK_NOT_FOUND")
    await edge.rest("POST", f"/tasks/{task_id}:cancel")


async def test_head_answers_as_get_without_a_body(edge: EdgeHarness) -> None:
    r = await edge.rest("HEAD", "/tasks")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"


async def test_extended_agent_card_is_the_tenants(edge: EdgeHarness) -> None:
    r = await edge.rest("GET", "/extendedAgentCard")
    assert r.status_code == 200
    interfaces = r.json()["supportedInterfaces"]
    assert [(i["protocolBinding"], i["url"], i["tenant"]) for i in interfaces] == [
        ("JSONRPC", "http://localhost/a2a", "open"),
        ("HTTP+JSON", "http://localhost", "open"),
    ]
    assert r.json()["signatures"]


# --- streaming ------------------------------------------------------------------------------


async def test_message_stream_sends_every_event_in_order(edge: EdgeHarness) -> None:
    body = {"message": _message("progress one\nartifact text A\nreply done")}
    r = await edge.rest("POST", "/message:stream", json=body)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = _events(r)
    assert all(name is None for name, _ in events)
    first, *updates = [doc for _, doc in events]
    assert first["task"]["status"]["state"] == states.SUBMITTED
    last = updates[-1]["statusUpdate"]
    assert last["status"]["state"] == states.COMPLETED and last["taskId"] == first["task"]["id"]
    assert any("artifactUpdate" in u for u in updates)


@pytest.mark.parametrize("http_method", ["GET", "POST"])
async def test_subscribe_follows_a_running_task(edge: EdgeHarness, http_method: str) -> None:
    task_id = await _task(edge, "progress started\nsleep 0.3\nreply finished")

    async def working() -> bool | None:
        task = (await edge.rest("GET", f"/tasks/{task_id}")).json()
        return True if task["status"]["state"] == states.WORKING else None

    await poll_until(working, 10, interval=0.02, what="working")
    r = await edge.rest(http_method, f"/tasks/{task_id}:subscribe")
    assert r.status_code == 200, r.text
    docs = [doc for _, doc in _events(r)]
    assert docs[0]["task"]["id"] == task_id
    assert docs[-1]["statusUpdate"]["status"]["state"] == states.COMPLETED


async def test_subscribe_to_a_terminal_task_is_refused(edge: EdgeHarness) -> None:
    task_id = await _task(edge)
    await _settled(edge, task_id)
    _status(await edge.rest("GET", f"/tasks/{task_id}:subscribe"), 400, "UNSUPPORTED_OPERATION")


# --- isolation and the tenant ---------------------------------------------------------------


async def test_another_callers_task_is_not_found_on_every_route(edge: EdgeHarness) -> None:
    task_id = await _task(edge, "sleep 5\nreply late")
    other = edge.rest_token(identity=OTHER)
    for method, path in (
        ("GET", f"/tasks/{task_id}"),
        ("POST", f"/tasks/{task_id}:cancel"),
        ("GET", f"/tasks/{task_id}:subscribe"),
        ("POST", f"/tasks/{task_id}/pushNotificationConfigs"),
        ("GET", f"/tasks/{task_id}/pushNotificationConfigs"),
        ("GET", f"/tasks/{task_id}/pushNotificationConfigs/x"),
        ("DELETE", f"/tasks/{task_id}/pushNotificationConfigs/x"),
    ):
        body = {"url": "https://hooks.example.com/a2a"} if method == "POST" else None
        r = await edge.rest(method, path, token=other, json=body)
        _status(r, 404, "TASK_NOT_FOUND")
    listed = await edge.rest("GET", "/tasks", token=other)
    assert listed.json()["tasks"] == []
    assert (await edge.rest("GET", f"/tasks/{task_id}")).status_code == 200
    await edge.rest("POST", f"/tasks/{task_id}:cancel")


async def test_a_token_for_another_tenant_is_401(edge: EdgeHarness) -> None:
    token = edge.rest_token(tenant="sibling")
    r = await edge.rest("GET", "/tasks", token=token)
    error = _status(r, 401, None)
    assert error["status"] == "UNAUTHENTICATED"
    assert "token authorizes tenant 'sibling', but the request addressed 'open'" in error["message"]
    assert r.headers["www-authenticate"] == 'Bearer error="invalid_token"'


async def test_an_unknown_tenant_is_invalid_params(edge: EdgeHarness) -> None:
    r = await edge.rest("GET", "/tasks", tenant="ghost")
    assert "unknown tenant 'ghost'" in _status(r, 400, "INVALID_PARAMS")["message"]


async def test_a_tenant_in_the_body_does_not_override_the_path(edge: EdgeHarness) -> None:
    body = {"tenant": "sibling", "message": _message("reply done")}
    r = await edge.rest("POST", "/message:send", json=body)
    assert r.status_code == 200
    task_id = r.json()["task"]["id"]
    assert (await edge.rest("GET", f"/tasks/{task_id}")).status_code == 200


# --- the token's audience -------------------------------------------------------------------


async def test_a_jsonrpc_audience_token_is_refused_on_rest(edge: EdgeHarness) -> None:
    r = await edge.rest("GET", "/tasks", token=edge.token())
    assert "audience" in _status(r, 401, None)["message"]


async def test_a_rest_audience_token_is_refused_on_jsonrpc(edge: EdgeHarness) -> None:
    r = await edge.rpc("ListTasks", {}, token=edge.rest_token())
    assert r.status_code == 401 and "audience" in r.text


async def test_no_token_is_401_before_the_body_is_read(edge: EdgeHarness) -> None:
    r = await edge.client.post("/open/message:send", content=b"{not json")
    error = _status(r, 401, None)
    assert error["message"] == "unauthorized: missing bearer token"


# --- bad input ------------------------------------------------------------------------------


async def test_unknown_routes_and_methods_are_404(edge: EdgeHarness) -> None:
    for method, path in (
        ("GET", "/message:send"),
        ("DELETE", "/tasks"),
        ("PUT", "/tasks/abc"),
        ("POST", "/tasks/abc:pause"),
        ("GET", "/tasks/abc/pushNotificationConfigs/x/y"),
        ("GET", "/tasks/abc/other"),
        ("POST", "/extendedAgentCard"),
    ):
        _status(await edge.rest(method, path), 404, "METHOD_NOT_FOUND")
    assert (await edge.client.get("/open/elsewhere")).status_code == 404


async def test_invalid_json_and_non_objects_are_400(edge: EdgeHarness) -> None:
    headers = edge.headers(edge.rest_token())
    r = await edge.client.post("/open/message:send", content=b"{not json", headers=headers)
    _status(r, 400, "PARSE_ERROR")
    r = await edge.client.post("/open/message:send", content=b"[]", headers=headers)
    _status(r, 400, "INVALID_REQUEST")
    r = await edge.client.post(
        "/open/message:send", content=b'{"message": {"parts": "x"}}', headers=headers
    )
    _status(r, 400, "INVALID_PARAMS")
    r = await edge.client.post(
        "/open/message:send", content=b'{"message": {"messageId": "a\\u0000"}}', headers=headers
    )
    _status(r, 400, "INVALID_PARAMS")


async def test_a_nul_in_the_path_is_invalid_params(edge: EdgeHarness) -> None:
    _status(await edge.rest("GET", "/tasks/a%00b"), 400, "INVALID_PARAMS")
    _status(await edge.rest("GET", "/tasks/a%00b/pushNotificationConfigs"), 400, "INVALID_PARAMS")


async def test_wrong_content_type_is_415(edge: EdgeHarness) -> None:
    headers = {**edge.headers(edge.rest_token()), "Content-Type": "text/plain"}
    r = await edge.client.post("/open/message:send", content=b"{}", headers=headers)
    _status(r, 415, "CONTENT_TYPE_NOT_SUPPORTED")


async def test_an_oversized_body_is_413(edge: EdgeHarness) -> None:
    big = {"message": _message("x" * (edge.settings.max_body_bytes + 1))}
    r = await edge.rest("POST", "/message:send", json=big)
    assert _status(r, 413, None)["status"] == "RESOURCE_EXHAUSTED"


async def test_a_version_other_than_1_0_is_refused(edge: EdgeHarness) -> None:
    for version in ("0.3", "99.0"):
        r = await edge.rest("GET", "/tasks", headers={"A2A-Version": version})
        error = _status(r, 400, "VERSION_NOT_SUPPORTED")
        assert error["details"][0]["metadata"] == {"supportedVersions": "1.0"}


async def test_the_stream_bound_is_shared_with_json_rpc_and_answers_429(db_url: str) -> None:
    async with edge_harness(db_url, background=True, stream_max_per_identity=1, **FAST) as edge:
        await edge.add_tenant("open", agent="scripted", profile="open", require_push_config=False)
        edge.default_tenant = "open"
        task_id = await _task(edge, "sleep 5\nreply late")
        # One stream held open on JSON-RPC takes the caller's only slot.
        async with SseCall(edge, "SubscribeToTask", {"id": task_id}) as held:
            assert held.status == 200
            r = await edge.rest("POST", "/message:stream", json={"message": _message("x", "m-2")})
            error = _status(r, 429, "RESOURCE_EXHAUSTED")
            assert error["details"][0]["metadata"]["scope"] == "identity"
        await edge.rest("POST", f"/tasks/{task_id}:cancel")


async def test_an_identity_without_key_is_400_invalid_argument(edge: EdgeHarness) -> None:
    r = await edge.rest("GET", "/tasks", token=edge.rest_token(identity={"name": "no key"}))
    error = _status(r, 400, None)
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == "bad request: gateway identity missing key"


async def test_a_full_queue_is_429_with_retry_after(db_url: str) -> None:
    async with edge_harness(db_url, max_queued_turns_per_identity=1) as edge:
        await edge.add_tenant("open", agent="scripted", profile="open", require_push_config=False)
        edge.default_tenant = "open"
        await _send(edge, "reply one", "q-1", returnImmediately=True)
        r = await _send(edge, "reply two", "q-2", returnImmediately=True)
        assert _status(r, 429, None)["status"] == "RESOURCE_EXHAUSTED"
        assert r.headers["retry-after"] == str(edge.settings.queue_full_retry_after_seconds)


async def test_a_rest_stream_heartbeats_ends_on_cancel_and_its_disconnect_frees_the_slot(
    db_url: str,
) -> None:
    async with edge_harness(
        db_url,
        background=True,
        stream_max_per_identity=1,
        stream_heartbeat_seconds=0.2,
        **FAST,
    ) as edge:
        await edge.add_tenant("open", agent="scripted", profile="open", require_push_config=False)
        edge.default_tenant = "open"
        task_id = await _task(edge, "sleep 30\nreply late")
        subscribe = ("GET", f"/tasks/{task_id}:subscribe")
        async with SseCall(edge, "SubscribeToTask", {}, rest=subscribe) as held:
            assert held.status == 200
            assert held.headers["content-type"] == "text/event-stream"
            assert (await held.event())["task"]["id"] == task_id
            _status(await edge.rest(*subscribe), 429, "RESOURCE_EXHAUSTED")
            await held.disconnect()
        async with SseCall(edge, "SubscribeToTask", {}, rest=("POST", subscribe[1])) as again:
            assert (await again.event())["task"]["id"] == task_id
            await asyncio.sleep(0.7)
            await edge.rest("POST", f"/tasks/{task_id}:cancel")
            events = await again.events()
            assert again.heartbeats >= 2
        assert events[-1]["statusUpdate"]["status"]["state"] == states.CANCELED
