"""``a2a_send`` made durable (issue 54): the intent is recorded before the request leaves,
the acknowledgement after, both under the tool call's stable idempotency key
(``app.db.peer_sends``). A call run again after a crash never sends again: an acknowledged
task is observed, a kept answer is returned, and an intent without an acknowledgement is
``DELIVERY_UNCERTAIN`` (the peer may or may not have it, and not every peer deduplicates).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from a2a.types import Message, Part, Role, Task

from app.agents.llm.tools import ToolContext
from app.db.peer_sends import ACKED, INTENT, NewPeerSend, PeerSend, PeerSendStore
from app.errors import PeerCallFailed
from app.peers.answers import JsonDict, failure_answer, message_answer, task_answer
from app.peers.client import SETTLED, PeerClients, PeerSession
from app.peers.directory import Peer
from app.peers.ids import is_safe_id

UNCERTAIN = (
    "the message was sent but its acknowledgement is unknown: the agent may or may not have "
    "it, and it is not sent again automatically (read the agent's tasks, or send anew)"
)

OUT_OF_TIME_UNSENT = PeerCallFailed(
    "the agent did not answer within the tool's time (tool_timeout_seconds); nothing was sent",
    reason="timeout",
    delivered=False,
)
OUT_OF_TIME_ACKED = PeerCallFailed(
    "the agent took the message, but its task did not settle within the tool's time "
    "(tool_timeout_seconds): read it later with a2a_get_task",
    reason="timeout",
)


@dataclass(frozen=True)
class Outgoing:
    text: str
    task_id: str | None  # a task of the peer waiting for input
    context_id: str | None  # the peer's conversation to continue
    wait_until: float | None  # until when (monotonic) to wait for the task; None: do not


@dataclass(frozen=True)
class Speaker:
    """Who we speak for: our tenant and the name of its agent (an edge token's identity)."""

    tenant: str
    name: str


class DurableSends:
    def __init__(self, clients: PeerClients, store: PeerSendStore) -> None:
        self._clients = clients
        self._store = store

    async def send(self, peer: Peer, ctx: ToolContext, out: Outgoing, us: Speaker) -> JsonDict:
        found = await self._store.find(ctx.tenant, ctx.idempotency_key)
        if found is not None:
            return await self._resume(peer, found, out, us)
        async with self._clients.connect(peer, our_tenant=us.tenant, our_name=us.name) as session:
            message_id = str(uuid.uuid4())
            held = await self._store.record_intent(
                NewPeerSend(
                    tenant=ctx.tenant,
                    call_key=ctx.idempotency_key,
                    identity=ctx.identity_key,
                    task_id=ctx.task_id,
                    agent=peer.name,
                    url=peer.entry.url,
                    message_id=message_id,
                )
            )
            if held.message_id != message_id:  # another run of the call got there first
                return _uncertain(peer, held.message_id)
            return await self._deliver(peer, session, ctx, out, message_id)

    async def _deliver(
        self, peer: Peer, session: PeerSession, ctx: ToolContext, out: Outgoing, message_id: str
    ) -> JsonDict:
        message = Message(role=Role.ROLE_USER, message_id=message_id, parts=[Part(text=out.text)])
        if out.task_id:
            message.task_id = out.task_id
        if out.context_id:
            message.context_id = out.context_id
        try:
            ack = await session.send(message)
        except PeerCallFailed as failure:
            if failure.delivered:
                return _uncertain(peer, message_id, cause=failure)
            refused = failure_answer(peer.name, failure, messageId=message_id)
            await self._store.refuse(ctx.tenant, ctx.idempotency_key, refused)
            return refused
        if isinstance(ack, Message):
            answer = message_answer(peer, ack, messageId=message_id)
            await self._store.acknowledge(
                ctx.tenant, ctx.idempotency_key, peer_task_id=None, answer=answer
            )
            return answer
        if not is_safe_id(ack.id):  # taken, but its id could steer our next request's path
            unsafe = PeerCallFailed(
                "SendMessage: the agent took the message but named its task with an id that "
                "is not followed",
                reason="bad_response",
            )
            kept = failure_answer(peer.name, unsafe, messageId=message_id)
            await self._store.acknowledge(
                ctx.tenant, ctx.idempotency_key, peer_task_id=None, answer=kept
            )
            return kept
        await self._store.acknowledge(
            ctx.tenant, ctx.idempotency_key, peer_task_id=ack.id, answer=None
        )
        return await _observed(peer, session, ack.id, ack, out.wait_until, messageId=message_id)

    async def out_of_time(self, peer: Peer, ctx: ToolContext) -> JsonDict:
        """The answer of a call the agent's tool deadline cut short, from what its row says:
        nothing recorded (nothing sent), an acknowledged task (its id, to read later), an
        intent without an acknowledgement (uncertain), or the answer kept."""
        found = await self._store.find(ctx.tenant, ctx.idempotency_key)
        if found is None:
            return failure_answer(peer.name, OUT_OF_TIME_UNSENT)
        extra: dict[str, Any] = {"messageId": found.message_id}
        if found.status == INTENT:
            return _uncertain(peer, found.message_id, cause=OUT_OF_TIME_ACKED)
        if found.status != ACKED or found.peer_task_id is None:
            return {**(found.answer or {}), **extra}
        return failure_answer(peer.name, OUT_OF_TIME_ACKED, taskId=found.peer_task_id, **extra)

    async def _resume(self, peer: Peer, found: PeerSend, out: Outgoing, us: Speaker) -> JsonDict:
        """The call ran before: what it did, without sending again."""
        extra: dict[str, Any] = {"messageId": found.message_id, "resumed": True}
        if found.url != peer.entry.url:
            failure = PeerCallFailed(
                "the agent's directory entry changed since this send; it is not observed "
                "under the new one",
                reason="endpoint_changed",
                delivered=False,
            )
            return failure_answer(peer.name, failure, **extra)
        if found.status == INTENT:
            return _uncertain(peer, found.message_id, resumed=True)
        if found.status != ACKED or found.peer_task_id is None:
            return {**(found.answer or {}), **extra}
        task_id = found.peer_task_id
        try:
            async with self._clients.connect(
                peer, our_tenant=us.tenant, our_name=us.name
            ) as session:
                task = await session.get_task(task_id)
                return await _observed(peer, session, task_id, task, out.wait_until, **extra)
        except PeerCallFailed as failure:
            return failure_answer(peer.name, failure, taskId=task_id, **extra)


async def _observed(
    peer: Peer,
    session: PeerSession,
    task_id: str,
    task: Task,
    wait_until: float | None,
    **extra: Any,
) -> JsonDict:
    """The task ``task_id`` (as last read: ``task``), after waiting for it to settle until
    ``wait_until`` when asked to. ``task_id`` is the id we hold, never one the peer's later
    answers name."""
    if wait_until is not None and task.status.state not in SETTLED:
        try:
            task = await session.wait(task_id, max(0.0, wait_until - time.monotonic()))
        except PeerCallFailed as failure:
            return failure_answer(peer.name, failure, taskId=task_id, **extra)
    return task_answer(peer, task, **extra)


def _uncertain(
    peer: Peer, message_id: str, *, cause: PeerCallFailed | None = None, resumed: bool = False
) -> JsonDict:
    failure = PeerCallFailed(UNCERTAIN, reason="delivery_uncertain")
    extra: dict[str, Any] = {"messageId": message_id}
    if cause is not None:
        extra["cause"] = cause.reason.upper()
    if resumed:
        extra["resumed"] = True
    return failure_answer(peer.name, failure, **extra)
