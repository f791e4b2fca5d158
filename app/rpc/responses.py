"""JSON-RPC response documents with the A2A error details (A2A §9.5)."""

from __future__ import annotations

import json
from typing import Any

from app.db.documents import RawJson as RawJson
from app.errors import RpcError
from app.rpc.envelope import RequestId

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
A2A_DOMAIN = "a2a-protocol.org"


def success(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


# Built once: ``json.dumps`` with any keyword builds a new encoder on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


def encode(doc: Any) -> bytes:
    try:
        return _ENCODER.encode(doc).encode()
    except UnicodeEncodeError:
        # An unpaired surrogate cannot be UTF-8 (requests carrying one are refused, but an
        # agent's own text may hold one): escaped, the answer is still JSON, never a 500.
        return _ASCII_ENCODER.encode(doc).encode()


def success_body(request_id: RequestId, result: Any) -> bytes:
    if isinstance(result, RawJson):
        try:
            text = result.text.encode()
        except UnicodeEncodeError:
            text = encode(json.loads(result.text))
        return b"".join((b'{"jsonrpc":"2.0","id":', encode(request_id), b',"result":', text, b"}"))
    return encode(success(request_id, result))


def failure(request_id: RequestId, error: RpcError) -> dict[str, Any]:
    info: dict[str, Any] = {
        "@type": ERROR_INFO_TYPE,
        "reason": error.a2a_reason,
        "domain": A2A_DOMAIN,
        "metadata": dict(error.metadata),
    }
    body: dict[str, Any] = {"code": error.code, "message": error.message, "data": [info]}
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def sse_event(data: bytes, event: str | None = None) -> bytes:
    """One Server-Sent Event (WHATWG HTML §9.2): one ``data:`` line (the JSON encoder escapes
    newlines, so a document never spans lines), named by ``event:`` when given."""
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + data + b"\n\n"
