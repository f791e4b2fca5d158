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

from app.errors import InvalidParams
from app.rpc.context import MethodTable, RpcCall
from app.tasks.accept import Acceptor
from app.tasks.blocking import wait_settled
from app.tasks.cancel import TaskCanceller
from app.tasks.push_configs import PushConfigService
from app.tasks.push_secrets import PushSecrets
from app.tasks.queries import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, ListQuery, TaskQueries
from app.tasks.send_params import parse_send_message
from app.tasks.wire import accept_answer, parse_params

if TYPE_CHECKING:
    from app.services import EdgeServices


def _required(value: str, field: str) -> str:
    if not value:
        raise InvalidParams(f"params.{field} is required")
    return value


def build_task_methods(services: EdgeServices) -> MethodTable:
    settings = services.settings
    allowlist = settings.allowlist
    secrets = PushSecrets.from_settings(settings, services.key)
    # In-process wake-up of this process's workers (on Postgres NOTIFY reaches the others).
    acceptor = Acceptor(services.db, secrets, wake=services.wakeup.notify)
    queries = TaskQueries(services.db, default_history_length=settings.default_history_length)
    canceller = TaskCanceller(services.db, default_history_length=settings.default_history_length)
    push_configs = PushConfigService(services.db, allowlist, secrets)

    async def send_message(call: RpcCall) -> Any:
        request = parse_send_message(call.params, tenant=call.tenant, allowlist=allowlist)
        accepted = await acceptor.accept(
            call.scope,
            request,
            dedupe=call.tenant.dedupe_message_ids,
            identity=call.caller.identity,
        )
        # Blocking only where no push config is required: the gateway always gets its
        # SUBMITTED answer in milliseconds (CONTRACT §5).
        if request.return_immediately or call.tenant.require_push_config:
            return accept_answer(accepted.task)
        await wait_settled(
            services.db,
            call.scope,
            accepted.task.id,
            limit_seconds=settings.blocking_timeout_seconds,
        )
        task = await queries.get(call.scope, accepted.task.id, request.history_length)
        return {"task": task}

    async def get_task(call: RpcCall) -> Any:
        request = parse_params(call.params, GetTaskRequest)
        history = request.history_length if request.HasField("history_length") else None
        return await queries.get(call.scope, _required(request.id, "id"), history)

    async def list_tasks(call: RpcCall) -> Any:
        request = parse_params(call.params, ListTasksRequest)
        query = ListQuery(
            context_id=request.context_id or None,
            state=TaskState.Name(request.status) if request.status else None,
            status_after=(
                request.status_timestamp_after.ToDatetime(tzinfo=UTC)
                if request.HasField("status_timestamp_after")
                else None
            ),
            page_size=request.page_size if request.HasField("page_size") else DEFAULT_PAGE_SIZE,
            page_token=request.page_token,
            history_length=request.history_length if request.HasField("history_length") else 0,
            include_artifacts=request.include_artifacts,
        )
        return await queries.list(call.scope, query)

    async def cancel_task(call: RpcCall) -> Any:
        request = parse_params(call.params, CancelTaskRequest)
        return await canceller.cancel(call.scope, _required(request.id, "id"))

    async def create_push_config(call: RpcCall) -> Any:
        request = parse_params(call.params, TaskPushNotificationConfig)
        _required(request.task_id, "taskId")
        return await push_configs.create(call.scope, request)

    async def get_push_config(call: RpcCall) -> Any:
        request = parse_params(call.params, GetTaskPushNotificationConfigRequest)
        return await push_configs.get(
            call.scope, _required(request.task_id, "taskId"), _required(request.id, "id")
        )

    async def list_push_configs(call: RpcCall) -> Any:
        request = parse_params(call.params, ListTaskPushNotificationConfigsRequest)
        size = request.page_size or DEFAULT_PAGE_SIZE
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise InvalidParams(f"params.pageSize must be between 1 and {MAX_PAGE_SIZE}")
        return await push_configs.list(
            call.scope, _required(request.task_id, "taskId"), size, request.page_token
        )

    async def delete_push_config(call: RpcCall) -> Any:
        request = parse_params(call.params, DeleteTaskPushNotificationConfigRequest)
        return await push_configs.delete(
            call.scope, _required(request.task_id, "taskId"), _required(request.id, "id")
        )

    return {
        "SendMessage": send_message,
        "GetTask": get_task,
        "ListTasks": list_tasks,
        "CancelTask": cancel_task,
        "CreateTaskPushNotificationConfig": create_push_config,
        "GetTaskPushNotificationConfig": get_push_config,
        "ListTaskPushNotificationConfigs": list_push_configs,
        "DeleteTaskPushNotificationConfig": delete_push_config,
    }
