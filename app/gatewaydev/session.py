"""Send one turn as the gateway does, then follow its pushes (CONTRACT §5 SendMessage, §7)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from app.gatewaydev.registration import Registration, RegistrationError, rpc
from app.gatewaydev.state import GatewayState
from app.testing.gateway import GatewayKit
from app.testing.push_receiver import PushReceiver, ReceivedPush

TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})


@dataclass(frozen=True)
class Turn:
    text: str
    tenant: str
    identity: dict[str, Any]
    task_id: str | None = None
    context_id: str | None = None


@dataclass(frozen=True)
class PushEvent:
    kind: Literal["progress", "final", "refused"]
    push: ReceivedPush


def send_message_params(turn: Turn, push_url: str, token: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": turn.text}],
    }
    if turn.task_id:
        message["taskId"] = turn.task_id
    if turn.context_id:
        message["contextId"] = turn.context_id
    return {
        "message": message,
        "configuration": {"taskPushNotificationConfig": {"url": push_url, "token": token}},
    }


async def send_turn(
    client: httpx.AsyncClient,
    kit: GatewayKit,
    registration: Registration,
    receiver: PushReceiver,
    turn: Turn,
    state: GatewayState | None = None,
) -> dict[str, Any]:
    """SendMessage with a fresh push endpoint on our receiver; returns the accepted task."""
    push_url, token = receiver.endpoint()
    if state is not None:
        state.save_endpoint(urlsplit(push_url).path, token)
    result = await rpc(
        client,
        kit,
        registration.endpoint,
        "SendMessage",
        send_message_params(turn, push_url, token),
        tenant=turn.tenant,
        identity=turn.identity,
    )
    task = result.get("task") if isinstance(result, dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("id"), str):
        raise RegistrationError('SendMessage: the result is not {"task": …}')
    return task


async def follow(
    receiver: PushReceiver, task_id: str, *, within: float
) -> AsyncIterator[PushEvent]:
    """The task's pushes in arrival order, once per message id, until its final push.

    Raises ``TimeoutError`` when no final push arrived within ``within`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    seen: set[str] = set()
    index = 0
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise TimeoutError
        push = await receiver.next_request(index, within=remaining)
        index += 1
        if push.task_id != task_id:
            continue
        if push.error is not None:
            yield PushEvent("refused", push)
            continue
        if not push.delivered or push.message_id is None or push.message_id in seen:
            continue  # a fault answer, or a redelivery (at least once) of a message we showed
        seen.add(push.message_id)
        final = push.message_id == f"{task_id}:final" or push.state in TERMINAL | INTERRUPTED
        yield PushEvent("final" if final else "progress", push)
        if final:
            return
