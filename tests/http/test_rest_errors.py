"""The HTTP+JSON binding's error bodies (A2A §11.6) and its stream's error event (§11.7)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from app.errors import PayloadTooLarge, TaskNotFound, TooManyRequests, Unauthorized
from app.http.rest import RestEventStream
from app.http.rest_errors import error_body, refusal_body
from app.rpc.context import StreamResult


def test_an_a2a_error_is_a_status_with_error_info() -> None:
    doc = json.loads(error_body(TaskNotFound("task not found", metadata={"taskId": "t"})))
    assert doc == {
        "error": {
            "code": 404,
            "status": "NOT_FOUND",
            "message": "task not found",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org",
                    "metadata": {"taskId": "t"},
                }
            ],
        }
    }


def test_refusals_carry_their_status_and_headers() -> None:
    body, headers = refusal_body(Unauthorized("token is expired", reason="expired"))
    assert json.loads(body) == {
        "error": {
            "code": 401,
            "status": "UNAUTHENTICATED",
            "message": "unauthorized: token is expired",
        }
    }
    assert headers == {"WWW-Authenticate": 'Bearer error="invalid_token"'}
    body, headers = refusal_body(TooManyRequests("queue full", retry_after_seconds=7))
    assert json.loads(body)["error"]["code"] == 429 and headers == {"Retry-After": "7"}
    body, headers = refusal_body(PayloadTooLarge("request body exceeds 10 bytes"))
    assert json.loads(body)["error"]["status"] == "RESOURCE_EXHAUSTED" and headers == {}


def _stream(*items: Any) -> tuple[StreamResult, list[bool]]:
    closed: list[bool] = []

    async def results() -> AsyncGenerator[list[Any], None]:
        for item in items:
            if isinstance(item, Exception):
                raise item
            yield [item]

    return StreamResult(results(), lambda: closed.append(True)), closed


async def test_events_are_bare_stream_responses() -> None:
    results, closed = _stream({"task": {"id": "t"}}, {"statusUpdate": {"taskId": "t"}})
    stream = RestEventStream(results)
    assert await stream.next() == b'data: {"task":{"id":"t"}}\n\n'
    assert await stream.next() == b'data: {"statusUpdate":{"taskId":"t"}}\n\n'
    with pytest.raises(StopAsyncIteration):
        await stream.next()
    await stream.aclose()
    assert closed == [True]


@pytest.mark.parametrize(
    ("fault", "code", "reason"),
    [
        (TaskNotFound("gone"), 404, "TASK_NOT_FOUND"),
        (RuntimeError("db secret"), 500, "INTERNAL_ERROR"),
    ],
)
async def test_a_fault_mid_stream_is_one_error_event(
    fault: Exception, code: int, reason: str
) -> None:
    results, _ = _stream({"task": {"id": "t"}}, fault)
    stream = RestEventStream(results)
    await stream.next()
    event = await stream.next()
    assert event.startswith(b"event: error\ndata: ")
    error = json.loads(event.split(b"data: ", 1)[1])["error"]
    assert (error["code"], error["details"][0]["reason"]) == (code, reason)
    assert b"secret" not in event
    with pytest.raises(StopAsyncIteration):
        await stream.next()
    await stream.aclose()
