"""SendStreamingMessage and SubscribeToTask (A2A 1.0 §3.1.2, §3.1.6) on the caller's tasks.

A stream slot is taken first, so a call past a bound is refused (-32000) before anything is
accepted or read; the tenant's rules for SendMessage (push config, ids, idempotency) are the
same for its streaming form. The answer is a ``StreamResult`` the HTTP layer sends as SSE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2a.types import SubscribeToTaskRequest

from app.attachments.reading import Documents
from app.errors import InvalidParams
from app.rpc.context import MethodTable, RpcCall, StreamResult
from app.tasks.accept import Acceptor
from app.tasks.push_secrets import PushSecrets
from app.tasks.queries import TaskQueries
from app.tasks.send_params import parse_send_message
from app.tasks.streams import StreamSlots, StreamTiming, TaskStreams
from app.tasks.wire import parse_params

if TYPE_CHECKING:
    from app.services import EdgeServices


class StreamMethods:
    def __init__(self, services: EdgeServices) -> None:
        settings = services.settings
        storage = services.db.storage
        self._targets = settings.push_targets
        self._rest_limit = settings.max_body_bytes
        secrets = PushSecrets.from_settings(settings, services.key)
        self._acceptor = Acceptor(services.db, secrets, documents=Documents(services.pdf))
        self._queries = TaskQueries(
            services.db, default_history_length=settings.default_history_length
        )
        wakeups = storage.signals.task_events
        poll = wakeups.poll_seconds(
            polled=settings.stream_poll_seconds, listened=settings.poll_seconds
        )
        slots = StreamSlots(
            per_identity=settings.stream_max_per_identity,
            per_process=settings.stream_max_per_process,
        )
        services.metrics.streams_open.set_function(lambda: slots.open_streams)
        self.streams = TaskStreams(storage.task_events, wakeups, slots, StreamTiming(poll))

    def table(self) -> MethodTable:
        return {
            "SendStreamingMessage": self.send_streaming_message,
            "SubscribeToTask": self.subscribe_to_task,
        }

    async def send_streaming_message(self, call: RpcCall) -> StreamResult:
        request = parse_send_message(
            call.params, tenant=call.tenant, targets=self._targets, rest_limit=self._rest_limit
        )
        release = self.streams.slots.acquire(call.scope)
        try:
            accepted = await self._acceptor.accept(
                call.scope,
                request,
                dedupe=call.tenant.dedupe_message_ids,
                identity=call.caller.identity,
                sender=call.caller.sender,
                steerable=call.tenant.agent_kind == "llm",
            )
        except BaseException:
            release()
            raise
        task_id = accepted.task.id
        return await self.streams.open(
            call.scope,
            task_id,
            lambda: self._queries.get(call.scope, task_id, request.history_length),
            release=release,
            refuse_terminal=False,
            from_creation=request.task_id is None,
        )

    async def subscribe_to_task(self, call: RpcCall) -> StreamResult:
        request = parse_params(call.params, SubscribeToTaskRequest)
        if not request.id:
            raise InvalidParams("params.id is required")
        task_id = request.id
        release = self.streams.slots.acquire(call.scope)
        return await self.streams.open(
            call.scope,
            task_id,
            lambda: self._queries.get(call.scope, task_id, None),
            release=release,
            refuse_terminal=True,
        )


def build_stream_methods(services: EdgeServices) -> MethodTable:
    return StreamMethods(services).table()
