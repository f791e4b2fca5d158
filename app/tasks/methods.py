"""Task methods (SendMessage, GetTask, ListTasks, CancelTask, push-config CRUD).

Placeholder until the durable-turns work lands: no task methods are served yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.rpc.context import MethodTable

if TYPE_CHECKING:
    from app.services import EdgeServices


def build_task_methods(services: EdgeServices) -> MethodTable:
    return {}
