"""ListTasks ``status`` given as a number outside the TaskState enum is a client mistake
(-32602), never an internal fault: the gateway retries -32603 (CONTRACT §3, §5 ListTasks)."""

from __future__ import annotations

import pytest

from app.testing.edge import EdgeHarness
from tests.tasks.conftest import rpc_error


@pytest.mark.parametrize("status", ["TASK_STATE_FOO", 2**31])
async def test_unknown_status_names_and_out_of_range_numbers_are_invalid_params(
    edge: EdgeHarness, status: object
) -> None:
    assert rpc_error(await edge.rpc("ListTasks", {"status": status}))["code"] == -32602


@pytest.mark.parametrize("status", [0, 1, "TASK_STATE_COMPLETED"])
async def test_known_statuses_are_accepted(edge: EdgeHarness, status: object) -> None:
    result = await edge.result("ListTasks", {"status": status})
    assert result["tasks"] == []


@pytest.mark.parametrize("status", [-1, 12, 99, -(2**31)])
async def test_numeric_status_outside_the_enum_is_invalid_params(
    edge: EdgeHarness, status: int
) -> None:
    assert rpc_error(await edge.rpc("ListTasks", {"status": status}))["code"] == -32602
