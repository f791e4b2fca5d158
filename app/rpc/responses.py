"""JSON-RPC response documents with the A2A error details (A2A §9.5)."""

from __future__ import annotations

from typing import Any

from app.errors import RpcError
from app.rpc.envelope import RequestId

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
A2A_DOMAIN = "a2a-protocol.org"


def success(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def failure(request_id: RequestId, error: RpcError) -> dict[str, Any]:
    info: dict[str, Any] = {
        "@type": ERROR_INFO_TYPE,
        "reason": error.a2a_reason,
        "domain": A2A_DOMAIN,
        "metadata": dict(error.metadata),
    }
    body: dict[str, Any] = {"code": error.code, "message": error.message, "data": [info]}
    return {"jsonrpc": "2.0", "id": request_id, "error": body}
