"""The HTTP+JSON binding's URL patterns (A2A §11.3; ``a2a.proto``'s ``/{tenant}/...`` bindings).

A request path is ``/{tenant}/<operation>``; ``match`` turns it and the HTTP method into the A2A
method name, the path's parameters and whether a body is read. Query parameters
(A2A §11.5: camelCase names, ``true``/``false``, decimal numbers, enum names, ISO 8601
timestamps, repeated fields repeated or comma-separated) become protobuf-JSON members.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from a2a.types import GetTaskRequest, ListTaskPushNotificationConfigsRequest, ListTasksRequest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from app.errors import InvalidParams
from app.text import shown

# The second path segment of every REST operation: a path whose second segment is one of
# these is the binding's (and answered by it, 404 included); anything else is not.
OPERATION_ROOTS = frozenset({"message:send", "message:stream", "tasks", "extendedAgentCard"})
PUSH_CONFIGS = "pushNotificationConfigs"


@dataclass(frozen=True)
class RestRoute:
    """One matched operation: the A2A method, the tenant, the path parameters as params
    members, whether the request body is the request message, and the request type whose
    fields the query parameters fill."""

    method: str
    tenant: str
    path_params: dict[str, str] = field(default_factory=dict)
    reads_body: bool = False
    query_type: type[ProtoMessage] | None = None


def is_rest_path(path: str) -> bool:
    """Whether ``path`` has the binding's shape (``/{tenant}/<operation root>...``)."""
    parts = path.split("/", 3)
    return len(parts) >= 3 and parts[0] == "" and parts[1] != "" and parts[2] in OPERATION_ROOTS


def match(http_method: str, path: str) -> RestRoute | None:
    """The operation for this method and path, or ``None`` (answered 404)."""
    segments = path.split("/")[1:]
    if len(segments) < 2 or not segments[0] or any(not s for s in segments[1:]):
        return None
    tenant, rest = segments[0], segments[1:]
    method = http_method.upper()
    if method == "HEAD":
        # Answered as GET (the server sends no body), as the operational routes are; never a
        # stream, which a HEAD request could not read.
        route = match("GET", path)
        return route if route is not None and route.method != "SubscribeToTask" else None
    if rest == ["message:send"] and method == "POST":
        return RestRoute("SendMessage", tenant, reads_body=True)
    if rest == ["message:stream"] and method == "POST":
        return RestRoute("SendStreamingMessage", tenant, reads_body=True)
    if rest == ["extendedAgentCard"] and method == "GET":
        return RestRoute("GetExtendedAgentCard", tenant)
    if rest[0] != "tasks":
        return None
    return _task_route(method, tenant, rest[1:])


def _task_route(method: str, tenant: str, rest: list[str]) -> RestRoute | None:
    if not rest:
        return (
            RestRoute("ListTasks", tenant, query_type=ListTasksRequest) if method == "GET" else None
        )
    task = rest[0]
    if len(rest) == 1:
        name, _, action = task.rpartition(":")
        if name and action == "cancel":
            return RestRoute("CancelTask", tenant, {"id": name}, True) if method == "POST" else None
        if name and action == "subscribe":
            if method in ("GET", "POST"):
                return RestRoute("SubscribeToTask", tenant, {"id": name}, method == "POST")
            return None
        if method == "GET":
            return RestRoute("GetTask", tenant, {"id": task}, query_type=GetTaskRequest)
        return None
    if rest[1] != PUSH_CONFIGS or len(rest) > 3:
        return None
    if len(rest) == 2:
        if method == "POST":
            return RestRoute("CreateTaskPushNotificationConfig", tenant, {"taskId": task}, True)
        if method == "GET":
            return RestRoute(
                "ListTaskPushNotificationConfigs",
                tenant,
                {"taskId": task},
                query_type=ListTaskPushNotificationConfigsRequest,
            )
        return None
    ids = {"taskId": task, "id": rest[2]}
    if method == "GET":
        return RestRoute("GetTaskPushNotificationConfig", tenant, ids)
    if method == "DELETE":
        return RestRoute("DeleteTaskPushNotificationConfig", tenant, ids)
    return None


def query_params(
    pairs: Iterable[tuple[str, str]], message_type: type[ProtoMessage]
) -> dict[str, Any]:
    """Query parameters as protobuf-JSON members of ``message_type`` (A2A §11.5).

    Names are the fields' camelCase JSON names; names that are not fields are ignored, as
    in a request body. A repeated scalar name keeps its last value. Values stay strings
    (protobuf-JSON reads numbers, enum names and timestamps from strings) except booleans,
    which must be ``true`` or ``false``.
    """
    descriptor: Descriptor = message_type.DESCRIPTOR
    fields = {f.json_name: f for f in descriptor.fields}
    out: dict[str, Any] = {}
    for name, value in pairs:
        spec = fields.get(name)
        if spec is None or name == "tenant":
            continue
        if _is_repeated(spec):
            out.setdefault(name, []).extend(v for v in value.split(",") if v)
        elif spec.type == FieldDescriptor.TYPE_BOOL:
            if value not in ("true", "false"):
                raise InvalidParams(
                    f"query parameter {shown(name)} must be true or false", reason="bad_query"
                )
            out[name] = value == "true"
        elif spec.type == FieldDescriptor.TYPE_MESSAGE and (
            spec.message_type.full_name != "google.protobuf.Timestamp"
        ):
            # A2A §11.5: nested objects are not carried in query parameters.
            raise InvalidParams(
                f"query parameter {shown(name)} is not supported", reason="bad_query"
            )
        else:
            out[name] = value
    return out


def _is_repeated(spec: FieldDescriptor) -> bool:
    return bool(spec.is_repeated)
