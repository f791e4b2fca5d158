"""Params parsing through ``a2a.types`` and the SendMessage request checks."""

from __future__ import annotations

import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, SendMessageRequest

from app.errors import InvalidParams
from app.settings import load_settings
from app.tasks.send_params import parse_send_message
from app.tasks.wire import parse_params, task_doc
from app.tenants.registry import TenantRecord
from tests.tasks.conftest import GATEWAY, PUSH_URL, send_params

GATEWAY_TENANT = TenantRecord(id="demo", manifest={})
OPEN_TENANT = TenantRecord(id="open", manifest={}, require_push_config=False)


def _parse(params, tenant=GATEWAY_TENANT):
    return parse_send_message(
        params, tenant=tenant, targets=load_settings(gateway_origins=[GATEWAY]).push_targets
    )


def test_parse_error_names_the_field_without_the_value():
    params = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": 12345}]}}
    with pytest.raises(InvalidParams) as caught:
        parse_params(params, SendMessageRequest, lenient_nested=True)
    assert "message.parts.text" in caught.value.message
    assert "12345" not in caught.value.message


def test_unknown_top_level_members_are_ignored_but_bad_enums_refused():
    request = parse_params({"id": "t", "tenant": "demo", "future": 1}, GetTaskRequest)
    assert request.id == "t"
    with pytest.raises(InvalidParams):
        parse_params({"id": "t", "historyLength": "many"}, GetTaskRequest)


def test_content_hash_ignores_member_order_and_spelling():
    a = _parse(send_params())
    reordered = {
        "configuration": {
            "task_push_notification_config": {"token": "notify-token", "url": PUSH_URL}
        },
        "message": {"parts": [{"text": "hello"}], "role": "ROLE_USER", "message_id": "m-1"},
    }
    b = _parse(reordered)
    assert a.content_hash == b.content_hash
    assert _parse(send_params(text="other")).content_hash != a.content_hash


def test_push_checked_before_message():
    with pytest.raises(InvalidParams) as caught:
        _parse({"message": {"messageId": ""}})
    assert "taskPushNotificationConfig.url" in caught.value.message


def test_secrets_never_echoed():
    push = {"url": PUSH_URL, "token": "super\nsecret"}
    with pytest.raises(InvalidParams) as caught:
        _parse(send_params(push=push))
    assert "secret" not in caught.value.message


def test_configuration_options():
    request = _parse(
        send_params(push=None, returnImmediately=True, historyLength=3), tenant=OPEN_TENANT
    )
    assert request.return_immediately and request.history_length == 3 and request.push is None
    with pytest.raises(InvalidParams):
        _parse(send_params(push=None, historyLength=-1), tenant=OPEN_TENANT)
    with pytest.raises(InvalidParams):
        _parse({"message": send_params()["message"], "configuration": "x"}, tenant=OPEN_TENANT)


def test_task_doc_is_protobuf_json():
    from app.db.models import TaskRow

    row = TaskRow(
        tenant="demo",
        id="t1",
        identity="u",
        context_id="c1",
        state="TASK_STATE_WORKING",
        status={"state": "TASK_STATE_WORKING", "timestamp": "2025-01-02T03:04:05.000006Z"},
        artifacts=[],
        metadata_={},
    )
    doc = task_doc(row)
    assert doc == {
        "id": "t1",
        "contextId": "c1",
        "status": {"state": "TASK_STATE_WORKING", "timestamp": "2025-01-02T03:04:05.000006Z"},
    }


def test_unrepresentable_values_are_invalid_params():
    params = send_params(push=None)
    params["message"]["parts"] = [{"data": {"x": float("nan")}}]
    with pytest.raises(InvalidParams):
        _parse(params, tenant=OPEN_TENANT)


@pytest.mark.parametrize("status", [float("inf"), float("-inf")])
def test_a_value_protobuf_cannot_convert_is_invalid_params(status: float) -> None:
    # upb raised OverflowError here (a -32603 before); the client's params are at fault.
    with pytest.raises(InvalidParams) as info:
        parse_params({"status": status}, ListTasksRequest)
    assert info.value.message == "params are not valid for ListTasksRequest"
