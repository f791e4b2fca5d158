"""Request bodies and the sample task the servers answer with (protobuf-JSON, A2A 1.0)."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

TIMESTAMP = "2026-01-01T00:00:00Z"


def task_id(tenant: str, n: int) -> str:
    """Deterministic task ids, the same in SQL (``md5(tenant || ':' || n)::uuid``)."""
    return str(uuid.UUID(hashlib.md5(f"{tenant}:{n}".encode()).hexdigest()))


def sample_task(tid: str = "00000000-0000-0000-0000-000000000001") -> dict[str, Any]:
    """A completed echo turn: what GetTask returns for the bench's tasks."""
    return {
        "id": tid,
        "contextId": tid,
        "status": {
            "state": "TASK_STATE_COMPLETED",
            "timestamp": TIMESTAMP,
            "message": {
                "messageId": f"{tid}:final",
                "contextId": tid,
                "taskId": tid,
                "role": "ROLE_AGENT",
                "parts": [{"text": "echo: hello from the bench"}],
            },
        },
        "history": [
            {
                "messageId": f"m-{tid}",
                "contextId": tid,
                "taskId": tid,
                "role": "ROLE_USER",
                "parts": [{"text": "hello from the bench"}],
            }
        ],
    }


def rpc(method: str, params: dict[str, Any], request_id: int = 1) -> str:
    doc = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(doc, separators=(",", ":"))


def get_task(tenant: str, tid: str) -> str:
    return rpc("GetTask", {"tenant": tenant, "id": tid})


def list_tasks(tenant: str) -> str:
    return rpc("ListTasks", {"tenant": tenant, "pageSize": 50})


def get_card(tenant: str) -> str:
    return rpc("GetExtendedAgentCard", {"tenant": tenant})


def send_message(tenant: str, push_url: str, *, unique: str = "@@N@@") -> str:
    """A new message with a push config; ``@@N@@`` is replaced per request by the load
    generator so every messageId is new (no idempotent replays)."""
    return rpc(
        "SendMessage",
        {
            "tenant": tenant,
            "message": {
                "messageId": f"m-{unique}",
                "role": "ROLE_USER",
                "parts": [{"text": "hello from the bench"}],
            },
            "configuration": {
                "returnImmediately": True,
                "taskPushNotificationConfig": {"url": push_url, "token": "bench-push-token"},
            },
        },
    )
