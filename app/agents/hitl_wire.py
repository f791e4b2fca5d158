"""The Looping gateway's HITL data parts (research/looping-gateway.md, "HITL shapes"): the
request an agent puts in its ``INPUT_REQUIRED`` status message, and the response or timeout
the gateway's continuation carries. Read by the accept path (is the answered request the
pending one?) and written by the ``llm`` agent's ``ask_user``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REQUEST_TYPE = "io.looping.hitl.request"
RESPONSE_TYPE = "io.looping.hitl.response"
TIMEOUT_TYPE = "io.looping.hitl.timeout"


def data_part(message: Mapping[str, Any] | None, *types: str) -> Mapping[str, Any] | None:
    """The first data part of ``message`` whose ``type`` is one of ``types``."""
    for part in (message or {}).get("parts") or []:
        data = part.get("data") if isinstance(part, Mapping) else None
        if isinstance(data, Mapping) and data.get("type") in types:
            return data
    return None


def answer_part(message: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The message's HITL response or timeout part, if it carries one."""
    return data_part(message, RESPONSE_TYPE, TIMEOUT_TYPE)


def pending_request_id(task: Mapping[str, Any]) -> str | None:
    """The ``requestId`` of the HITL request a task's status message carries, if any."""
    status = task.get("status")
    message = status.get("message") if isinstance(status, Mapping) else None
    request = data_part(message, REQUEST_TYPE)
    rid = request.get("requestId") if request is not None else None
    return rid if isinstance(rid, str) else None
