"""The HTTP+JSON URL patterns (A2A §11.3) and query parameters (A2A §11.5)."""

from __future__ import annotations

import pytest
from a2a.types import GetTaskRequest, ListTasksRequest

from app.errors import InvalidParams
from app.http.rest_routes import is_rest_path, match, query_params


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", "/t/message:send", ("SendMessage", {}, True)),
        ("POST", "/t/message:stream", ("SendStreamingMessage", {}, True)),
        ("GET", "/t/tasks", ("ListTasks", {}, False)),
        ("GET", "/t/tasks/abc", ("GetTask", {"id": "abc"}, False)),
        ("POST", "/t/tasks/abc:cancel", ("CancelTask", {"id": "abc"}, True)),
        ("GET", "/t/tasks/abc:subscribe", ("SubscribeToTask", {"id": "abc"}, False)),
        ("POST", "/t/tasks/abc:subscribe", ("SubscribeToTask", {"id": "abc"}, True)),
        (
            "POST",
            "/t/tasks/abc/pushNotificationConfigs",
            ("CreateTaskPushNotificationConfig", {"taskId": "abc"}, True),
        ),
        (
            "GET",
            "/t/tasks/abc/pushNotificationConfigs",
            ("ListTaskPushNotificationConfigs", {"taskId": "abc"}, False),
        ),
        (
            "GET",
            "/t/tasks/abc/pushNotificationConfigs/c1",
            ("GetTaskPushNotificationConfig", {"taskId": "abc", "id": "c1"}, False),
        ),
        (
            "DELETE",
            "/t/tasks/abc/pushNotificationConfigs/c1",
            ("DeleteTaskPushNotificationConfig", {"taskId": "abc", "id": "c1"}, False),
        ),
        ("GET", "/t/extendedAgentCard", ("GetExtendedAgentCard", {}, False)),
    ],
)
def test_every_operation_is_matched(
    method: str, path: str, expected: tuple[str, dict[str, str], bool]
) -> None:
    route = match(method, path)
    assert route is not None
    assert (route.method, route.path_params, route.reads_body) == expected
    assert route.tenant == "t"
    assert is_rest_path(path)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/t/message:send"),
        ("HEAD", "/t/tasks/abc:subscribe"),
        ("HEAD", "/t/message:send"),
        ("DELETE", "/t/tasks/abc"),
        ("POST", "/t/tasks/abc"),
        ("GET", "/t/tasks/abc:cancel"),
        ("POST", "/t/tasks/:cancel"),
        ("POST", "/t/tasks/abc:pause"),
        ("GET", "/t/tasks/abc/other"),
        ("GET", "/t/tasks/abc/pushNotificationConfigs/c1/more"),
        ("GET", "/t/tasks//pushNotificationConfigs"),
        ("GET", "/t/tasks/"),
        ("GET", "//tasks"),
        ("GET", "/t"),
    ],
)
def test_anything_else_is_no_operation(method: str, path: str) -> None:
    assert match(method, path) is None


def test_other_paths_are_not_the_bindings() -> None:
    for path in ("/a2a", "/.well-known/agent-card.json", "/livez", "/t/other", "/t", "/"):
        assert not is_rest_path(path)


def test_query_parameters_become_protobuf_json() -> None:
    pairs = [
        ("contextId", "c"),
        ("status", "TASK_STATE_WORKING"),
        ("pageSize", "10"),
        ("includeArtifacts", "true"),
        ("statusTimestampAfter", "2026-01-01T00:00:00Z"),
        ("tenant", "elsewhere"),
        ("unknown", "x"),
    ]
    assert query_params(pairs, ListTasksRequest) == {
        "contextId": "c",
        "status": "TASK_STATE_WORKING",
        "pageSize": "10",
        "includeArtifacts": True,
        "statusTimestampAfter": "2026-01-01T00:00:00Z",
    }
    assert query_params([("historyLength", "1"), ("historyLength", "3")], GetTaskRequest) == {
        "historyLength": "3"
    }


def test_a_boolean_must_be_true_or_false() -> None:
    with pytest.raises(InvalidParams):
        query_params([("includeArtifacts", "1")], ListTasksRequest)


def test_head_is_answered_as_get() -> None:
    for path, method in (("/t/tasks", "ListTasks"), ("/t/tasks/abc", "GetTask")):
        route = match("HEAD", path)
        assert route is not None and route.method == method
