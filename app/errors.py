"""The one error tree of the edge.

Every failure the outside world can see is an ``EdgeError`` with a stable ``reason`` code
(used in logs and metric labels) and a ``message`` that is safe to show: it never carries a
token, a key, a credential or the text of an internal exception. Library errors are
translated into this tree at the boundary where they occur.

Two families:

* HTTP-level refusals (``Unauthorized`` 401, ``BadRequest`` 400, ``PayloadTooLarge`` 413),
  answered as ``text/plain`` before the JSON-RPC envelope is trusted (CONTRACT §3), and
  ``TooManyRequests`` 429, a transport-level "later" the gateway retries.
* ``RpcError`` subclasses, answered as JSON-RPC 2.0 errors at HTTP 200 with the A2A code table
  and a ``google.rpc.ErrorInfo`` entry (A2A §9.5, CONTRACT §3 last paragraph).
"""

from __future__ import annotations

from typing import Any, ClassVar


class EdgeError(Exception):
    """Base of every error the edge reports outward."""

    default_reason: ClassVar[str] = "error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason


class ConfigError(EdgeError):
    """A setting is missing or invalid. Raised at start, never at request time."""

    default_reason = "config"


# --- HTTP-level refusals -------------------------------------------------------------------


class HttpRefusal(EdgeError):
    """Refused before JSON-RPC: answered with a plain-text body ``<prefix>: <message>``."""

    status_code: ClassVar[int] = 400
    grpc_status: ClassVar[str] = "INVALID_ARGUMENT"  # the google.rpc.Code name on gRPC
    prefix: ClassVar[str] = "bad request"

    @property
    def body(self) -> str:
        return f"{self.prefix}: {self.message}"


class Unauthorized(HttpRefusal):
    """401 with ``WWW-Authenticate: Bearer error="invalid_token"`` (RFC 6750 §3)."""

    status_code = 401
    grpc_status = "UNAUTHENTICATED"
    prefix = "unauthorized"
    default_reason = "unauthorized"


class BadRequest(HttpRefusal):
    status_code = 400
    prefix = "bad request"
    default_reason = "bad_request"


class PayloadTooLarge(HttpRefusal):
    status_code = 413
    grpc_status = "RESOURCE_EXHAUSTED"
    prefix = "payload too large"
    default_reason = "body_too_large"


class TooManyRequests(HttpRefusal):
    """429 with ``Retry-After`` (RFC 6585 §4, RFC 9110 §10.2.3): a refusal for now, not for
    good. The gateway retries a non-2xx answer whose body is not a JSON-RPC error, and takes
    any JSON-RPC error but -32603 as final (research/looping-gateway.md §2)."""

    status_code = 429
    grpc_status = "RESOURCE_EXHAUSTED"
    prefix = "too many requests"
    default_reason = "too_many_requests"

    def __init__(self, message: str, *, retry_after_seconds: int, reason: str | None = None):
        super().__init__(message, reason=reason)
        self.retry_after_seconds = retry_after_seconds


class PeerCallFailed(EdgeError):
    """A call to another A2A agent of an ``llm`` agent's directory did not give an answer
    (``app.peers``). ``reason`` is the stable code the model is shown upper-cased
    (``unknown_agent`` -> ``UNKNOWN_AGENT``); ``code`` what the peer said, as a code only (an
    HTTP status, an A2A error name or a JSON-RPC code: never its text, which can carry
    credentials or diagnostics). ``delivered``: whether a send may have reached the peer
    (``False`` only when it certainly did not: refused before or by the peer)."""

    default_reason = "peer_failed"

    def __init__(
        self, message: str, *, reason: str, code: str | None = None, delivered: bool = True
    ) -> None:
        super().__init__(message, reason=reason)
        self.code = code
        self.delivered = delivered


# --- JSON-RPC errors (A2A code table) ------------------------------------------------------


class RpcError(EdgeError):
    """A JSON-RPC error answered at HTTP 200.

    ``a2a_reason`` is the ``ErrorInfo.reason`` of the A2A specification (upper snake case);
    ``metadata`` lands in ``ErrorInfo.metadata`` and must hold only safe, public values.
    ``http_status`` and ``grpc_status`` are the same error on the HTTP+JSON and gRPC bindings
    (A2A §5.4; ``grpc_status`` is the ``google.rpc.Code`` name).
    """

    code: ClassVar[int] = -32603
    a2a_reason: ClassVar[str] = "INTERNAL_ERROR"
    http_status: ClassVar[int] = 500
    grpc_status: ClassVar[str] = "INTERNAL"
    default_reason = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: dict[str, str] | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, reason=reason)
        self.metadata = metadata or {}
        self.extra_data = data or {}


class ParseError(RpcError):
    code = -32700
    a2a_reason = "PARSE_ERROR"
    http_status = 400
    grpc_status = "INVALID_ARGUMENT"
    default_reason = "parse_error"


class InvalidRequest(RpcError):
    code = -32600
    a2a_reason = "INVALID_REQUEST"
    http_status = 400
    grpc_status = "INVALID_ARGUMENT"
    default_reason = "invalid_request"


class MethodNotFound(RpcError):
    code = -32601
    a2a_reason = "METHOD_NOT_FOUND"
    http_status = 404
    grpc_status = "NOT_FOUND"
    default_reason = "method_not_found"


class InvalidParams(RpcError):
    code = -32602
    a2a_reason = "INVALID_PARAMS"
    http_status = 400
    grpc_status = "INVALID_ARGUMENT"
    default_reason = "invalid_params"


class InternalError(RpcError):
    """-32603 is reserved for real internal faults: the gateway retries it."""

    code = -32603
    a2a_reason = "INTERNAL_ERROR"
    http_status = 500
    grpc_status = "INTERNAL"
    default_reason = "internal_error"


class TaskNotFound(RpcError):
    code = -32001
    a2a_reason = "TASK_NOT_FOUND"
    http_status = 404
    grpc_status = "NOT_FOUND"
    default_reason = "task_not_found"


class TaskNotCancelable(RpcError):
    code = -32002
    a2a_reason = "TASK_NOT_CANCELABLE"
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    default_reason = "task_not_cancelable"


class PushNotificationNotSupported(RpcError):
    code = -32003
    a2a_reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    http_status = 400
    grpc_status = "UNIMPLEMENTED"  # A2A 1.0.0 §5.4, which the TCK checks (docs/protocol.md)
    default_reason = "push_not_supported"


class UnsupportedOperation(RpcError):
    code = -32004
    a2a_reason = "UNSUPPORTED_OPERATION"
    http_status = 400
    grpc_status = "UNIMPLEMENTED"  # A2A 1.0.0 §5.4, which the TCK checks (docs/protocol.md)
    default_reason = "unsupported_operation"


class TooManyStreams(RpcError):
    """Past a bound on open streams (per caller or per process): refused before streaming
    starts. -32000 is JSON-RPC 2.0's implementation-defined server error; A2A has no code for
    it."""

    code = -32000
    a2a_reason = "RESOURCE_EXHAUSTED"
    http_status = 429
    grpc_status = "RESOURCE_EXHAUSTED"
    default_reason = "too_many_streams"


class ContentTypeNotSupported(RpcError):
    """HTTP 415 (RFC 9110 §15.5.16) on both HTTP bindings, where A2A §5.4 lists 400: the
    request was refused before its body was read, as the JSON-RPC endpoint always did."""

    code = -32005
    a2a_reason = "CONTENT_TYPE_NOT_SUPPORTED"
    http_status = 415
    grpc_status = "INVALID_ARGUMENT"
    default_reason = "content_type_not_supported"


class InvalidAgentResponse(RpcError):
    code = -32006
    a2a_reason = "INVALID_AGENT_RESPONSE"
    http_status = 500
    grpc_status = "INTERNAL"
    default_reason = "invalid_agent_response"


class ExtendedAgentCardNotConfigured(RpcError):
    code = -32007
    a2a_reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    default_reason = "extended_card_not_configured"


class ExtensionSupportRequired(RpcError):
    code = -32008
    a2a_reason = "EXTENSION_SUPPORT_REQUIRED"
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    default_reason = "extension_support_required"


class VersionNotSupported(RpcError):
    code = -32009
    a2a_reason = "VERSION_NOT_SUPPORTED"
    http_status = 400
    grpc_status = "UNIMPLEMENTED"  # A2A 1.0.0 §5.4, which the TCK checks (docs/protocol.md)
    default_reason = "version_not_supported"
