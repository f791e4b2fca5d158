"""Baseline for the streaming benchmark: the official ``a2a-sdk`` 1.3 server streaming.

``DefaultRequestHandler`` with its in-memory task store and event queues (the SDK's streams
live in one process's memory: it has no way for a subscriber on one process to see another's
events, so the baseline is one process). The agent waits ``BENCH_STREAM_WAIT`` seconds (for the
subscribers to arrive), then publishes ``BENCH_STREAM_EVENTS`` WORKING status updates back to
back and completes: the same turn as the edge's scripted one. No authentication.

``uvicorn bench.sdk_stream_server:app``.
"""

from __future__ import annotations

import asyncio
import os

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
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
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

WAIT = float(os.environ.get("BENCH_STREAM_WAIT", "5"))
EVENTS = int(os.environ.get("BENCH_STREAM_EVENTS", "50"))


def _message(context: RequestContext, key: str, text: str) -> Message:
    """An agent message with the same fields as the edge's (``app.tasks.wire.agent_message``):
    the id ``<taskId>:<key>``, the task and context ids, one text part."""
    assert context.task_id is not None and context.context_id is not None
    return Message(
        message_id=f"{context.task_id}:{key}",
        context_id=context.context_id,
        task_id=context.task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


class ProgressExecutor(AgentExecutor):
    """The edge's scripted turn ``sleep``, ``progress e0`` ... ``reply done``: the same
    updates, the same message keys (the script's line numbers)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        task = Task(
            id=context.task_id,
            context_id=context.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
        )
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await asyncio.sleep(WAIT)
        for i in range(EVENTS):
            message = _message(context, f"line-{i + 2}", f"e{i}")
            await updater.update_status(TaskState.TASK_STATE_WORKING, message=message)
        await updater.complete(_message(context, "final", "done"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def agent_card() -> AgentCard:
    return AgentCard(
        name="sdk-stream-baseline",
        description="a2a-sdk streaming baseline for the looping-edge benchmarks",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url="http://127.0.0.1/a2a", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="progress", name="Progress", description="progress", tags=["x"])],
    )


def build_app() -> Starlette:
    handler = DefaultRequestHandler(
        agent_executor=ProgressExecutor(), task_store=InMemoryTaskStore(), agent_card=agent_card()
    )

    async def livez(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = create_jsonrpc_routes(handler, "/a2a")
    return Starlette(routes=[*routes, Route("/livez", livez)])


app = build_app()
