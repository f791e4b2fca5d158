"""Task methods (CONTRACT §5): SendMessage, GetTask, ListTasks, CancelTask and push-config
CRUD. Handlers only translate params (via ``a2a.types``) and answers; every one of them reaches
data through ``call.scope`` alone, so another caller's task is ``-32001`` like a missing one.
"""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING, Any

from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from app.attachments.reading import Documents
from app.db.list_query import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, ListQuery
from app.errors import EdgeError, InvalidParams
from app.negotiation.gate import NegotiationGate
from app.rpc.context import MethodTable, RpcCall
from app.tasks.accept import Acceptor, QueueBound
from app.tasks.blocking import wait_settled
from app.tasks.cancel import TaskCanceller
from app.tasks.outcome import message_result
from app.tasks.push_configs import PushConfigService
from app.tasks.push_secrets import PushSecrets
from app.tasks.queries import TaskQueries
from app.tasks.send_params import parse_send_message
from app.tasks.wire import accept_answer, parse_params

if TYPE_CHECKING:
    from app.services import EdgeServices


def _required(value: str, field: str) -> str:
    if not value:
        raise InvalidParams(f"params.{field} is required")
    return value


_PLAIN_GET_TASK = frozenset({"tenant", "id", "historyLength"})
_INT32_MAX = 2**31 - 1


def _plain_get_task(params: dict[str, Any]) -> tuple[str, int | None] | None:
    """GetTask params in their everyday shape, read without the protobuf parse (a measurable
    share of the hot path); anything else, including every invalid value, goes
    through ``parse_params`` so the answers and error messages stay the same."""
    if not _PLAIN_GET_TASK.issuperset(params):
        return None
    task_id = params.get("id")
    history = params.get("historyLength")
    if not isinstance(task_id, str) or not task_id:
        return None
    if history is None and "historyLength" not in params:
        return task_id, None
    if type(history) is not int or not 0 <= history <= _INT32_MAX:
        return None
    return task_id, history


class TaskMethods:
    """The handlers; each reaches data only through ``call.scope``."""

    def __init__(self, services: EdgeServices) -> None:
        settings = services.settings
        self._db = services.db
        self._blocking_seconds = settings.blocking_timeout_seconds
        secrets = PushSecrets.from_settings(settings, services.key)
        self._acceptor = Acceptor(
            services.db, secrets, QueueBound.from_settings(settings), Documents(services.pdf)
        )
        history = settings.default_history_length
        self._queries = TaskQueries(services.db, default_history_length=history)
        self._canceller = TaskCanceller(services.db, default_history_length=history)
        self._targets = settings.push_targets
        self._rest_limit = settings.max_body_bytes
        self._push_configs = PushConfigService(services.db, self._targets, secrets)
        storage = services.db.storage
        self._negotiations = NegotiationGate(storage.negotiations, storage.task_lifecycle.state)

    def table(self) -> MethodTable:
        return {
            "SendMessage": self.send_message,
            "GetTask": self.get_task,
            "ListTasks": self.list_tasks,
            "CancelTask": self.cancel_task,
            "CreateTaskPushNotificationConfig": self.create_push_config,
            "GetTaskPushNotificationConfig": self.get_push_config,
            "ListTaskPushNotificationConfigs": self.list_push_configs,
            "DeleteTaskPushNotificationConfig": self.delete_push_config,
        }

    async def send_message(self, call: RpcCall) -> Any:
        request = parse_send_message(
            call.params, tenant=call.tenant, targets=self._targets, rest_limit=self._rest_limit
        )
        # A decision data part is a negotiation turn (issue 51): peers only, rival rule first.
        turn = await self._negotiations.check(
            peer=call.caller.peer,
            tenant=call.tenant,
            identity=call.scope.identity,
            message=request.message,
            task_id=request.task_id,
        )
        try:
            accepted = await self._acceptor.accept(
                call.scope,
                request,
                dedupe=call.tenant.dedupe_message_ids,
                identity=call.caller.identity,
                sender=call.caller.sender,
                steerable=call.tenant.agent_kind == "llm" and turn is None,
            )
        except EdgeError:
            if turn is not None:
                await self._negotiations.refused(turn, call.tenant.id)
            raise
        if turn is not None:
            await self._negotiations.accepted(
                turn, call.tenant.id, accepted.task.id, accepted.task.context_id
            )
        # Blocking only for open tenants and where no push config is required: the gateway
        # always gets its SUBMITTED answer in milliseconds (CONTRACT §5).
        blocking = call.tenant.is_open or not call.tenant.require_push_config
        if request.return_immediately or not blocking:
            return accept_answer(accepted.task)
        await wait_settled(
            self._db, call.scope, accepted.task.id, limit_seconds=self._blocking_seconds
        )
        task = await self._queries.get(call.scope, accepted.task.id, request.history_length)
        # An open tenant's agent may answer with a Message (issue 49): a blocking call gets it.
        message = message_result(task) if call.tenant.is_open else None
        return {"message": message} if message is not None else {"task": task}

    async def get_task(self, call: RpcCall) -> Any:
        plain = _plain_get_task(call.params)
        if plain is not None:
            task_id, history = plain
        else:
            request = parse_params(call.params, GetTaskRequest)
            history = request.history_length if request.HasField("history_length") else None
            task_id = _required(request.id, "id")
        return await self._queries.get_wire(call.scope, task_id, history)

    async def list_tasks(self, call: RpcCall) -> Any:
        request = parse_params(call.params, ListTasksRequest)
        # TaskState is an open enum: protobuf parsing lets any int32 through, and an unknown
        # number is the client's mistake (-32602), never an internal fault (-32603 is retried).
        if request.status not in TaskState.values():
            raise InvalidParams("params.status is not a TaskState value")
        query = ListQuery(
            context_id=request.context_id or None,
            state=_state_name(request.status),
            status_after=(
                request.status_timestamp_after.ToDatetime(tzinfo=UTC)
                if request.HasField("status_timestamp_after")
                else None
            ),
            page_size=request.page_size if request.HasField("page_size") else DEFAULT_PAGE_SIZE,
            page_token=request.page_token,
            # Lists stay small unless history is asked for (GetTask defaults to some).
            history_length=request.history_length if request.HasField("history_length") else 0,
            include_artifacts=request.include_artifacts,
        )
        return await self._queries.list_wire(call.scope, query)

    async def cancel_task(self, call: RpcCall) -> Any:
        request = parse_params(call.params, CancelTaskRequest)
        return await self._canceller.cancel(call.scope, _required(request.id, "id"))

    async def create_push_config(self, call: RpcCall) -> Any:
        request = parse_params(call.params, TaskPushNotificationConfig)
        _required(request.task_id, "taskId")
        return await self._push_configs.create(call.scope, request, open_tenant=call.tenant.is_open)

    async def get_push_config(self, call: RpcCall) -> Any:
        request = parse_params(call.params, GetTaskPushNotificationConfigRequest)
        return await self._push_configs.get(
            call.scope, _required(request.task_id, "taskId"), _required(request.id, "id")
        )

    async def list_push_configs(self, call: RpcCall) -> Any:
        request = parse_params(call.params, ListTaskPushNotificationConfigsRequest)
        size = request.page_size or DEFAULT_PAGE_SIZE
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise InvalidParams(f"params.pageSize must be between 1 and {MAX_PAGE_SIZE}")
        return await self._push_configs.list(
            call.scope, _required(request.task_id, "taskId"), size, request.page_token
        )

    async def delete_push_config(self, call: RpcCall) -> Any:
        request = parse_params(call.params, DeleteTaskPushNotificationConfigRequest)
        return await self._push_configs.delete(
            call.scope, _required(request.task_id, "taskId"), _required(request.id, "id")
        )


def build_task_methods(services: EdgeServices) -> MethodTable:
    return TaskMethods(services).table()


def _state_name(value: int) -> str | None:
    """The ``status`` filter: protobuf enums are open, so a number outside ``TaskState`` parses
    and must be refused here as the caller's mistake (-32602), not an internal fault."""
    if not value:
        return None
    try:
        return str(TaskState.Name(value))
    except ValueError:
        raise InvalidParams("status is not a TaskState value", reason="bad_status") from None
