"""Sends of the ``llm`` agents' ``a2a_send`` tool (issue 54): one row per tool call, keyed by
the call's stable idempotency key, so a call run again after a crash knows what the first run
did. The row is written as an *intent* (peer, messageId) before the request leaves; the
peer's acknowledgement (its task id, or its Message answer) makes it *acked*; a request the
peer certainly did not take makes it *refused*. Transitions apply only from ``intent``.

``PeerSendStore`` is the role; ``app.db.shared.peer_sends`` plays it on both backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

INTENT = "intent"
ACKED = "acked"
REFUSED = "refused"


@dataclass(frozen=True)
class NewPeerSend:
    tenant: str
    call_key: str  # the tool call's ToolContext.idempotency_key
    identity: str
    task_id: str  # our task whose turn made the call
    agent: str  # the directory name
    url: str  # the entry's url when the send was made (a retargeted name is another peer)
    message_id: str


@dataclass(frozen=True)
class PeerSend:
    call_key: str
    agent: str
    url: str
    message_id: str
    status: str
    peer_task_id: str | None
    answer: Mapping[str, Any] | None  # the bounded result kept for a Message or a refusal


class PeerSendStore(Protocol):
    async def find(self, tenant: str, call_key: str) -> PeerSend | None: ...

    async def sent(self, tenant: str, identity: str, url: str, peer_task_id: str) -> bool:
        """Whether ``identity`` of ``tenant`` made the task ``peer_task_id`` of the peer at
        ``url`` (an acknowledged send of its own)."""
        ...

    async def record_intent(self, send: NewPeerSend) -> PeerSend:
        """Write the intent unless the call has a row; the row that holds afterwards (an
        earlier run's wins: the caller compares ``message_id``)."""
        ...

    async def acknowledge(
        self,
        tenant: str,
        call_key: str,
        *,
        peer_task_id: str | None,
        answer: Mapping[str, Any] | None,
    ) -> bool:
        """intent -> acked."""
        ...

    async def refuse(self, tenant: str, call_key: str, answer: Mapping[str, Any]) -> bool:
        """intent -> refused."""
        ...
