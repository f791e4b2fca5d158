"""Baseline (a): the official ``a2a-sdk`` 1.3 server — what a user would pick instead.

Its JSON-RPC routes (``create_jsonrpc_routes``), ``DefaultRequestHandler`` and
``DatabaseTaskStore`` (+ ``DatabasePushNotificationConfigStore``) on the same PostgreSQL server
as the edge (its own database), with a bearer check that does no cryptography: the token
``sdk-<identity>`` names the caller, so tasks are owner-scoped as on the edge.

The agent only accepts: it publishes the task as ``SUBMITTED`` and returns, which is what the
edge's durable accept does before its worker runs the turn (the edge runs with
``--no-worker --no-push`` in the accept benchmark).

``uvicorn bench.sdk_server:app`` with ``BENCH_SDK_DB_URL`` (tables created beforehand by
``bench.seed.seed_sdk``, so several uvicorn workers never race on ``create_all``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from a2a.auth.user import User
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.tasks import TaskUpdater
from a2a.server.tasks.database_push_notification_config_store import (
    DatabasePushNotificationConfigStore,
)
from a2a.server.tasks.database_task_store import DatabaseTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class BenchUser(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


class BearerContextBuilder(DefaultServerCallContextBuilder):
    """``Authorization: Bearer sdk-<identity>``; no signature, no crypto."""

    def build(self, request: Request) -> ServerCallContext:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.startswith("sdk-"):
            raise HTTPException(401, "unauthorized")
        context = super().build(request)
        context.user = BenchUser(token[4:])
        return context


class AcceptOnlyExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The SDK wants the Task itself as the first event; the handler stores it and, with
        # returnImmediately, answers with it.
        assert context.task_id is not None and context.context_id is not None
        task = Task(
            id=context.task_id,
            context_id=context.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
        )
        if context.message is not None:
            task.history.append(context.message)
        await event_queue.enqueue_event(task)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def agent_card() -> AgentCard:
    return AgentCard(
        name="sdk-baseline",
        description="a2a-sdk baseline for the looping-edge benchmarks",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url="http://127.0.0.1/a2a", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(push_notifications=True, streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="echo", tags=["echo"])],
    )


def build_app(db_url: str) -> Starlette:
    engine = create_async_engine(db_url)
    handler = DefaultRequestHandler(
        agent_executor=AcceptOnlyExecutor(),
        task_store=DatabaseTaskStore(engine, create_table=False),
        agent_card=agent_card(),
        push_config_store=DatabasePushNotificationConfigStore(engine, create_table=False),
    )

    async def livez(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()
        await engine.dispose()

    routes = create_jsonrpc_routes(handler, "/a2a", context_builder=BearerContextBuilder())
    return Starlette(routes=[*routes, Route("/livez", livez)], lifespan=lifespan)


app = build_app(os.environ.get("BENCH_SDK_DB_URL", "postgresql+asyncpg://postgres@127.0.0.1/x"))
