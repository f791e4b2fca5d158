"""Error bodies of the HTTP+JSON binding: ``google.rpc.Status`` as JSON (A2A §11.6, AIP-193).

``{"error": {"code": <HTTP status>, "status": <google.rpc.Code name>, "message": ...,
"details": [ErrorInfo]}}``. A2A errors carry a ``google.rpc.ErrorInfo`` with their A2A reason
and the ``a2a-protocol.org`` domain (A2A §11.6: several errors share one status); the HTTP
status and code name are the error's own (``RpcError.http_status``/``grpc_status``, A2A §5.4).
Refusals of the token (401), of the body's size (413) and of load (429) carry no A2A reason;
their message is the same text the JSON-RPC endpoint answers in plain text (CONTRACT §3).
"""

from __future__ import annotations

from typing import Any

from app.errors import HttpRefusal, RpcError, TooManyRequests, Unauthorized
from app.rpc.responses import A2A_DOMAIN, ERROR_INFO_TYPE, encode

JSON = "application/json"


def status_doc(error: RpcError) -> dict[str, Any]:
    info = {
        "@type": ERROR_INFO_TYPE,
        "reason": error.a2a_reason,
        "domain": A2A_DOMAIN,
        "metadata": dict(error.metadata),
    }
    return {
        "error": {
            "code": error.http_status,
            "status": error.grpc_status,
            "message": error.message,
            "details": [info],
        }
    }


def error_body(error: RpcError) -> bytes:
    return encode(status_doc(error))


def refusal_body(refusal: HttpRefusal) -> tuple[bytes, dict[str, str]]:
    """The body and headers of an HTTP-level refusal."""
    headers: dict[str, str] = {}
    if isinstance(refusal, Unauthorized):
        # RFC 6750 §3: the challenge names the error; the body carries the stable reason.
        headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    elif isinstance(refusal, TooManyRequests):
        headers["Retry-After"] = str(refusal.retry_after_seconds)
    doc = {
        "error": {
            "code": refusal.status_code,
            "status": refusal.grpc_status,
            "message": refusal.body,
        }
    }
    return encode(doc), headers
