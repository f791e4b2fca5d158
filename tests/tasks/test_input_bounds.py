"""Client input that once reached the database as -32603 is refused up front as -32602, on
both backends: ids bounded in UTF-8 bytes (index keys), a page token nested past the JSON
parser's depth, and a gateway identity holding text no backend can store."""

from __future__ import annotations

import base64

from app.security.token import MAX_IDENTITY_KEY_BYTES
from app.tasks.send_params import MAX_CONTEXT_ID, MAX_MESSAGE_ID
from app.testing.edge import EdgeHarness
from tests.tasks.conftest import rpc_error, send_params

CJK = "\u4e2d"  # three bytes in UTF-8


async def test_context_id_over_its_byte_bound_is_invalid_params(edge: EdgeHarness) -> None:
    # 900 characters are under the character count once allowed, but 2,700 bytes.
    error = rpc_error(await edge.rpc("SendMessage", send_params(context_id=CJK * 900)))
    assert error["code"] == -32602 and "contextId" in error["message"]
    listed = await edge.result("ListTasks", {})
    assert listed["tasks"] == []


async def test_message_id_over_its_byte_bound_is_invalid_params(edge: EdgeHarness) -> None:
    long_id = CJK * (MAX_MESSAGE_ID // 3 + 1)
    error = rpc_error(await edge.rpc("SendMessage", send_params(long_id)))
    assert error["code"] == -32602 and "messageId" in error["message"]


async def test_longest_allowed_ids_are_stored(edge: EdgeHarness) -> None:
    # The bounds fit the indexes: the largest identity key, context id and message id all at
    # once are accepted and read back (PostgreSQL refuses an index entry past its limit).
    identity = {"key": "k" * MAX_IDENTITY_KEY_BYTES}
    context = CJK * (MAX_CONTEXT_ID // 3)
    message_id = CJK * (MAX_MESSAGE_ID // 3)
    task = (
        await edge.result(
            "SendMessage", send_params(message_id, context_id=context), identity=identity
        )
    )["task"]
    assert task["contextId"] == context
    got = await edge.result("GetTask", {"id": task["id"]}, identity=identity)
    assert got["id"] == task["id"]
    listed = await edge.result("ListTasks", {"contextId": context}, identity=identity)
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]


async def test_deeply_nested_page_token_is_invalid_params(edge: EdgeHarness) -> None:
    raw = ("[" * 5000 + "]" * 5000).encode()
    token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    error = rpc_error(await edge.rpc("ListTasks", {"pageToken": token}))
    assert error["code"] == -32602 and "pageToken" in error["message"]


async def test_identity_with_bad_text_is_refused_at_verification(edge: EdgeHarness) -> None:
    for identity in (
        {"key": "user\u0000one"},
        {"key": "user-1", "name": "Grace\ud800"},
        {"key": "k" * (MAX_IDENTITY_KEY_BYTES + 1)},
        {"key": "k" * 1900},
    ):
        for method, params in (
            ("SendMessage", send_params()),
            ("GetTask", {"id": "00000000-0000-4000-8000-000000000000"}),
            ("ListTasks", {}),
        ):
            response = await edge.rpc(method, params, identity=identity)
            assert response.status_code == 400, (identity, method, response.text)
            assert "identity" in response.text
            assert "\u0000" not in response.text
