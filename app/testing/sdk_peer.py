"""An A2A agent built on the official ``a2a-sdk`` server, requiring a bearer token, on a real
loopback port: the far side of an edge agent's A2A tools in tests (issue 54), for agents that
are not another looping-edge.

::

    with SdkPeer(token="t0k3n", answer=lambda text: f"B says: {text}") as peer:
        # peer.base_url: its card at /.well-known/agent-card.json, JSON-RPC at /a2a,
        # HTTP+JSON under /rest; every request without ``Authorization: Bearer t0k3n`` is 401
        ...
        assert [m.text for m in peer.received] == ["hello"]

Each message the agent runs is recorded (``received``: text and ``messageId``), so a test can
say how many times a peer got it. ``answer`` maps the message's text to the reply, put both in
the completed task's status message and in one text artifact. ``delay`` holds the answer (a
slow peer; the task stays ``WORKING`` meanwhile). ``ack_delay`` holds the acknowledgement
itself: the message is received and recorded, but the ``SendMessage`` answer waits, so a
caller killed meanwhile never learns the task id (``acknowledge.set()`` lets it go). The
server runs uvicorn in a thread of its own, so a test's event loop never blocks it and worker
processes reach it over HTTP.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

JSONRPC_PATH = "/a2a"
REST_PATH = "/rest"


@dataclass(frozen=True)
class Received:
    message_id: str
    text: str


def echo(text: str) -> str:
    return f"echo: {text}"


class _RequireBearer:
    """401 for a request to either binding without ``Authorization: Bearer <token>``
    (compared in constant time), before the SDK sees it: raised inside the SDK's context
    builder, its HTTP+JSON error handler would turn the refusal into a 500. The card stays
    public."""

    def __init__(self, app: ASGIApp, token: str, peer: SdkPeer) -> None:
        self._app = app
        self._token = token.encode()
        self._peer = peer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith((JSONRPC_PATH, REST_PATH)):
            given = Headers(scope=scope).get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not secrets.compare_digest(
                token.encode("latin-1"), self._token
            ):
                self._peer.refused += 1
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await self._app(scope, receive, send)


class _Executor(AgentExecutor):
    def __init__(self, peer: SdkPeer) -> None:
        self._peer = peer

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        message = context.message
        text = "\n".join(p.text for p in message.parts if p.text) if message else ""
        self._peer.received.append(Received(message.message_id if message else "", text))
        if self._peer.ack_delay:
            await asyncio.to_thread(self._peer.acknowledge.wait, self._peer.ack_delay)
        task = Task(
            id=context.task_id,
            context_id=context.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
        )
        if message is not None:
            task.history.append(message)
        await event_queue.enqueue_event(task)  # the SDK wants the Task as the first event
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if self._peer.delay:
            await asyncio.sleep(self._peer.delay)
        reply = self._peer.answer(text)
        await updater.add_artifact([Part(text=reply)], name="answer")
        done = Message(
            message_id=f"{context.task_id}:answer",
            role=Role.ROLE_AGENT,
            parts=[Part(text=reply)],
        )
        await updater.complete(done)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class SdkPeer:
    def __init__(
        self,
        token: str,
        *,
        answer: Callable[[str], str] = echo,
        delay: float = 0.0,
        ack_delay: float = 0.0,
        name: str = "sdk-peer",
    ) -> None:
        self.token = token
        self.answer = answer
        self.delay = delay
        self.ack_delay = ack_delay
        self.acknowledge = threading.Event()  # set: held acknowledgements go out at once
        self.name = name
        self.received: list[Received] = []
        self.refused = 0  # requests answered 401
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def card(self) -> AgentCard:
        return AgentCard(
            name=self.name,
            description="An a2a-sdk agent that requires a bearer token",
            version="1.0.0",
            supported_interfaces=[
                AgentInterface(
                    url=self.base_url + JSONRPC_PATH,
                    protocol_binding="JSONRPC",
                    protocol_version="1.0",
                ),
                AgentInterface(
                    url=self.base_url + REST_PATH,
                    protocol_binding="HTTP+JSON",
                    protocol_version="1.0",
                ),
            ],
            capabilities=AgentCapabilities(streaming=False, push_notifications=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="answer", name="Answer", description="answers", tags=["x"])],
        )

    def app(self) -> Starlette:
        card = self.card()
        handler = DefaultRequestHandler(
            agent_executor=_Executor(self), task_store=InMemoryTaskStore(), agent_card=card
        )
        routes: list[Any] = [
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, JSONRPC_PATH),
            *create_rest_routes(handler, path_prefix=REST_PATH),
        ]
        guard = Middleware(_RequireBearer, token=self.token, peer=self)
        return Starlette(routes=routes, middleware=[guard])

    def __enter__(self) -> SdkPeer:
        config = uvicorn.Config(
            self.app(), lifespan="off", log_config=None, access_log=False, log_level="warning"
        )
        self._server = uvicorn.Server(config)
        server = self._server
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[self._sock])), daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the a2a-sdk peer did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.acknowledge.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()


__all__ = ["Received", "SdkPeer", "echo"]
