"""Calls to one peer through the a2a-sdk client, on the interface its card chose (JSON-RPC or
HTTP+JSON): send (acknowledged at once: ``returnImmediately``), read, cancel, and waiting
for a task to settle within a bound: ``SubscribeToTask`` when the card says the peer
streams, else ``GetTask`` every ``EDGE_PEER_POLL_SECONDS`` (also when a streaming peer refuses
the subscription outright; a stream that fails is reported, not replaced), and in both cases a
final ``GetTask`` as the authoritative answer. Every request has its deadline
(``EDGE_PEER_REQUEST_SECONDS``) and a bounded answer (``app.peers.transport``); every failure
is a ``PeerCallFailed`` (``app.peers.failures``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)

from app.db.peer_pins import PeerPinStore
from app.errors import PeerCallFailed
from app.peers.auth import PeerAuth
from app.peers.card import BINDINGS, CardReader, PeerCard
from app.peers.directory import Peer
from app.peers.failures import translate
from app.peers.transport import peer_http_client
from app.security.keys import SigningKey
from app.settings import Settings

T = TypeVar("T")

# Where a task stops for now: finished for good, or waiting on someone (A2A TaskState).
SETTLED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)


@dataclass(frozen=True)
class PeerLimits:
    wait_seconds: float
    request_seconds: float
    poll_seconds: float
    max_response_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> PeerLimits:
        return cls(
            settings.peer_wait_seconds,
            settings.peer_request_seconds,
            settings.peer_poll_seconds,
            settings.peer_max_response_bytes,
        )


class PeerSession:
    """One operation's connection to one peer (its card read, its client made)."""

    def __init__(
        self,
        peer: Peer,
        card: PeerCard,
        http: httpx.AsyncClient,
        limits: PeerLimits,
        cards: CardReader,
    ) -> None:
        self.peer = peer
        self.card = card
        self._cards = cards
        self._limits = limits
        self._clients: dict[bool, Client] = {}
        self._http = http
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self.clock: Callable[[], float] = time.monotonic

    def _client(self, *, streaming: bool) -> Client:
        client = self._clients.get(streaming)
        if client is None:
            config = ClientConfig(
                streaming=streaming,
                httpx_client=self._http,
                supported_protocol_bindings=list(BINDINGS),
            )
            client = ClientFactory(config).create(self.card.card)
            self._clients[streaming] = client
        return client

    async def _call(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self._limits.request_seconds):
                return await call()
        except Exception as exc:
            raise translate(exc, what) from None

    async def send(self, message: Message) -> Task | Message:
        """The peer's acknowledgement: its task, or a Message that answers at once."""
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )

        async def first() -> StreamResponse:
            events = self._client(streaming=False).send_message(request)
            async with aclosing(events):  # type: ignore[type-var]
                async for event in events:
                    return event
            raise PeerCallFailed("SendMessage: no answer", reason="bad_response")

        event = await self._call("SendMessage", first)
        if event.HasField("task") and event.task.id:
            return event.task
        if event.HasField("message"):
            return event.message
        raise PeerCallFailed(
            "SendMessage: the answer is neither a task nor a message", reason="bad_response"
        )

    async def get_task(self, task_id: str) -> Task:
        request = GetTaskRequest(id=task_id, history_length=0)
        return await self._call("GetTask", lambda: self._client(streaming=False).get_task(request))

    async def cancel(self, task_id: str) -> Task:
        request = CancelTaskRequest(id=task_id)
        return await self._call(
            "CancelTask", lambda: self._client(streaming=False).cancel_task(request)
        )

    async def live_card(self) -> AgentCard:
        """The tenant's own card (``GetExtendedAgentCard``, verified like the public one)
        when the card offers it, else the public card."""
        if not self.card.card.capabilities.extended_agent_card:
            return self.card.card
        client = self._client(streaming=False)
        card = await self._call(
            "GetExtendedAgentCard",
            lambda: client.get_extended_agent_card(GetExtendedAgentCardRequest()),
        )
        await self._cards.verify_card(self.peer, card)
        return card

    async def wait(self, task_id: str, seconds: float) -> Task:
        """The task once settled or once ``seconds`` passed, from a final ``GetTask`` (the
        last read: none is made after the deadline but the one at it)."""
        deadline = self.clock() + min(seconds, self._limits.wait_seconds)
        task = await self.get_task(task_id)
        if task.status.state in SETTLED or self.clock() >= deadline:
            return task
        if self.card.streaming:
            failed = await self._follow(task_id, deadline)
            task = await self.get_task(task_id)
            if failed is None or task.status.state in SETTLED:
                return task
            if not _refused(failed):
                raise failed
        while self.clock() < deadline:
            await self.sleep(min(self._limits.poll_seconds, deadline - self.clock()))
            task = await self.get_task(task_id)
            if task.status.state in SETTLED:
                return task
        return task  # the last read, at the deadline or after the stream: the final one

    async def _follow(self, task_id: str, deadline: float) -> PeerCallFailed | None:
        """``SubscribeToTask`` until an event says the task settled or the deadline passed;
        the stream's failure, if it failed. A failed stream is not replaced with polling: the
        caller's final read decides (a task that settled just before the subscription is
        refused one: A2A refuses subscriptions to a settled task)."""
        request = SubscribeToTaskRequest(id=task_id)
        try:
            async with asyncio.timeout(max(deadline - self.clock(), 0.0)):
                async for event in self._client(streaming=True).subscribe(request):
                    if _settled(event):
                        return None
        except TimeoutError:
            return None
        except Exception as exc:
            return translate(exc, "SubscribeToTask")
        return None


# A subscription refused outright (the peer advertises streaming but does not serve it to
# us), as opposed to a stream that failed: the former falls back to reading the task.
_REFUSALS = frozenset({"METHOD_NOT_FOUND", "UNSUPPORTED_OPERATION", "-32601", "-32004"})


def _refused(failure: PeerCallFailed) -> bool:
    if failure.reason == "peer_error":
        return failure.code in _REFUSALS
    return failure.reason == "http_error" and failure.code in {"404", "405", "501"}


def _settled(event: StreamResponse) -> bool:
    if event.HasField("task"):
        return bool(event.task.status.state in SETTLED)
    if event.HasField("status_update"):
        return bool(event.status_update.status.state in SETTLED)
    return bool(event.HasField("message"))


class PeerClients:
    """What every call to a peer shares: settings, our key, the pins, the environment, and
    the HTTP transport under the bounded clients (the process's; a test's in-process app)."""

    def __init__(
        self,
        settings: Settings,
        key: SigningKey,
        pins: PeerPinStore,
        environ: Mapping[str, str],
        transport: httpx.AsyncBaseTransport,
    ) -> None:
        self.limits = PeerLimits.of(settings)
        self._transport = transport
        self._auth = PeerAuth(settings, key, environ)
        self._jwks_http = httpx.AsyncClient(
            transport=transport, follow_redirects=False, trust_env=False
        )
        self.cards = CardReader(settings, pins, self._jwks_http)

    def _http(self, auth: httpx.Auth | None = None) -> httpx.AsyncClient:
        return peer_http_client(
            self._transport,
            max_bytes=self.limits.max_response_bytes,
            request_seconds=self.limits.request_seconds,
            auth=auth,
        )

    @asynccontextmanager
    async def connect(
        self, peer: Peer, *, our_tenant: str, our_name: str
    ) -> AsyncIterator[PeerSession]:
        """A session on ``peer``: its card read and verified, the client authenticated."""
        async with self._http() as plain:
            try:
                async with asyncio.timeout(self.limits.request_seconds):
                    card = await self.cards.read(peer, plain)
            except TimeoutError:
                raise translate(TimeoutError(), "the card") from None
        auth = self._auth.for_call(peer, card.url, our_tenant=our_tenant, our_name=our_name)
        async with self._http(auth) as http:
            yield PeerSession(peer, card, http, self.limits, self.cards)

    async def aclose(self) -> None:
        await self._jwks_http.aclose()
