"""Text and numbers a request may carry (app/text.py, app/rpc/envelope.py), over the
real app on both backends: unpaired surrogates and U+0000 are refused with a JSON-RPC error
naming the member (they were a 500, or a -32603 the gateway would retry, on PostgreSQL);
NaN and Infinity are not JSON (-32700); a surrogate *pair* is ordinary text."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.db.models import TaskRow
from app.testing.edge import EdgeHarness, edge_harness
from tests.tasks.conftest import send_params


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url) as harness:
        await harness.add_tenant("demo")
        yield harness


async def _post(edge: EdgeHarness, body: str, **headers: str) -> httpx.Response:
    """A body as written (``json=`` in httpx cannot carry an unpaired surrogate)."""
    return await edge.client.post(
        edge.settings.rpc_path, content=body.encode(), headers={**edge.headers(), **headers}
    )


def _request(method: str, params: dict[str, Any], request_id: Any = 9) -> str:
    # ensure_ascii: every non-ASCII character as a \\u escape, as many clients send them.
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
        ensure_ascii=True,
    )


def _error(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    doc = response.json()
    assert "error" in doc, doc
    return doc  # type: ignore[no-any-return]


async def _tasks(edge: EdgeHarness) -> int:
    async with edge.services.db.transaction() as s:
        return int((await s.execute(select(func.count()).select_from(TaskRow))).scalar_one())


async def test_an_unpaired_surrogate_as_the_id_is_an_invalid_request_not_a_500(
    edge: EdgeHarness,
) -> None:
    body = _request("GetTask", {"tenant": "demo", "id": "x"}).replace('"id": 9', '"id": "\\ud800"')
    doc = _error(await _post(edge, body))
    assert doc["id"] is None
    assert doc["error"]["code"] == -32600
    assert "id must be valid Unicode text" in doc["error"]["message"]


@pytest.mark.parametrize(
    ("method", "params", "where"),
    [
        ("GetTask", {"tenant": "demo", "id": "a\u0000b"}, "params.id"),
        ("GetTask", {"tenant": "demo", "id": "\ud800"}, "params.id"),
        ("CancelTask", {"tenant": "demo", "id": "a\u0000b"}, "params.id"),
        ("ListTasks", {"tenant": "demo", "contextId": "a\u0000b"}, "params.contextId"),
        ("ListTasks", {"tenant": "demo", "status": "\udfff"}, "params.status"),
        ("GetTaskPushNotificationConfig", {"tenant": "demo", "taskId": "t\u0000"}, "params.taskId"),
        ("ListTasks", {"tenant": "demo", "a\u0000": 1}, "params.<member name>"),
    ],
)
async def test_nul_or_an_unpaired_surrogate_in_params_is_32602_naming_the_member(
    edge: EdgeHarness, method: str, params: dict[str, Any], where: str
) -> None:
    doc = _error(await _post(edge, _request(method, params)))
    assert doc["id"] == 9
    assert doc["error"]["code"] == -32602
    assert doc["error"]["message"].startswith(f"{where} must be valid Unicode text")
    assert doc["error"]["data"][0]["metadata"] == {}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("message", "parts", 0, "text"), "hi\u0000"),
        (("message", "messageId"), "m\ud83d"),
        (("message", "metadata"), {"k": "v\u0000"}),
    ],
)
async def test_a_refused_send_message_leaves_no_task_behind(
    edge: EdgeHarness, path: tuple[Any, ...], value: Any
) -> None:
    params: dict[str, Any] = {"tenant": "demo", **send_params()}
    node: Any = params
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    doc = _error(await _post(edge, _request("SendMessage", params)))
    assert doc["error"]["code"] == -32602
    assert await _tasks(edge) == 0


async def test_a_surrogate_pair_is_ordinary_text(edge: EdgeHarness) -> None:
    params = {"tenant": "demo", **send_params(text="smile \U0001f600")}
    response = await _post(edge, _request("SendMessage", params))
    task = response.json()["result"]["task"]
    got = await edge.result("GetTask", {"id": task["id"]})
    assert got["history"][0]["parts"][0]["text"] == "smile \U0001f600"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_nan_and_infinity_are_not_json(edge: EdgeHarness, constant: str) -> None:
    body = _request("ListTasks", {"tenant": "demo", "pageSize": 0}).replace(
        '"pageSize": 0', f'"pageSize": {constant}'
    )
    doc = _error(await _post(edge, body))
    assert doc["error"]["code"] == -32700
    assert doc["id"] is None


def _token(value: Any) -> str:
    raw = json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "token",
    [
        _token(["0001-01-01T00:00:00+01:00", "x"]),  # out of range once moved to UTC
        _token(["9999-12-31T23:59:59-01:00", "x"]),
        _token(["2026-01-01T00:00:00+00:00", "a\u0000b"]),
        _token(["2026-01-01T00:00:00+00:00", "\ud800"]),
    ],
)
async def test_a_page_token_that_decodes_to_nonsense_is_32602(
    edge: EdgeHarness, token: str
) -> None:
    doc = _error(await edge.rpc("ListTasks", {"pageToken": token}))
    assert doc["error"]["code"] == -32602
    assert doc["error"]["message"] == "params.pageToken is not a valid page token"


async def test_a_push_config_page_token_that_decodes_to_nul_is_32602(edge: EdgeHarness) -> None:
    task = (await edge.result("SendMessage", send_params()))["task"]
    for token in ("A" * 64, base64.urlsafe_b64encode(b"a\x00b").decode()):
        doc = _error(
            await edge.rpc(
                "ListTaskPushNotificationConfigs", {"taskId": task["id"], "pageToken": token}
            )
        )
        assert doc["error"]["code"] == -32602, doc


@pytest.mark.parametrize("declared", [b"abc", b"12a", b"\xb2", b"-1", b""])
async def test_a_content_length_that_is_not_digits_is_400(
    edge: EdgeHarness, declared: bytes
) -> None:
    # b"\xb2" is "²" in latin-1, which str.isdigit() accepts and int() does not.
    response = await edge.client.post(
        edge.settings.rpc_path,
        content=b"{}",
        headers=[*edge.headers().items(), ("Content-Length", declared)],
    )
    assert response.status_code == 400, response.text
    assert response.text == "bad request: invalid Content-Length"


async def test_a_number_past_a_doubles_range_is_not_read_as_infinity(edge: EdgeHarness) -> None:
    body = _request("ListTasks", {"tenant": "demo", "pageSize": 0}).replace(
        '"pageSize": 0', '"pageSize": 1e999'
    )
    assert _error(await _post(edge, body))["error"]["code"] == -32700
