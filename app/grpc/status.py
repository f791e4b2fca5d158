"""Edge errors as gRPC statuses (A2A §10.6, §5.4): the status code each error of the one
error tree names (``grpc_status``; the A2A table for the A2A error types), the error's safe
message, and a ``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer
whose details hold a ``google.rpc.ErrorInfo`` (``reason``, ``domain: "a2a-protocol.org"``,
the error's public metadata), as the a2a-sdk's clients read it.

Refusals before the A2A layer (the token, CONTRACT §3) carry an ``ErrorInfo`` too, with the
stable reason of the refused rule in this edge's own domain; a refusal for now (429) adds a
``google.rpc.RetryInfo``. Nothing here ever carries an exception's text.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2

from app.errors import (
    EdgeError,
    HttpRefusal,
    InternalError,
    RpcError,
    TooManyRequests,
)

A2A_DOMAIN = "a2a-protocol.org"
# ErrorInfo.domain of the edge's own refusals (the token rules): not A2A error types.
EDGE_DOMAIN = "looping-edge"
DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class GrpcFailure:
    """What ``context.abort`` takes: the code, the message and the rich-status trailer."""

    code: grpc.StatusCode
    message: str
    trailing_metadata: tuple[tuple[str, bytes], ...]


def failure_of(error: EdgeError) -> GrpcFailure:
    if isinstance(error, RpcError):
        code = _code(error.grpc_status)
        info = error_details_pb2.ErrorInfo(
            reason=error.a2a_reason, domain=A2A_DOMAIN, metadata=dict(error.metadata)
        )
        return _failure(code, error.message, [info])
    if isinstance(error, HttpRefusal):
        code = _code(error.grpc_status)
        details: list[error_details_pb2.ErrorInfo | error_details_pb2.RetryInfo] = [
            error_details_pb2.ErrorInfo(reason=error.reason.upper(), domain=EDGE_DOMAIN)
        ]
        if isinstance(error, TooManyRequests):
            details.append(
                error_details_pb2.RetryInfo(
                    retry_delay=duration_pb2.Duration(seconds=error.retry_after_seconds)
                )
            )
        return _failure(code, error.body, details)
    return failure_of(InternalError("internal error"))


def internal_failure() -> GrpcFailure:
    """An internal fault: INTERNAL with a fixed text (the exception stays in the log)."""
    return failure_of(InternalError("internal error"))


def _code(name: str) -> grpc.StatusCode:
    """The status code an error of the one tree names (``app.errors``: A2A §5.4 for the A2A
    error types); INTERNAL for a name gRPC does not know."""
    return getattr(grpc.StatusCode, name, grpc.StatusCode.INTERNAL)


def _failure(
    code: grpc.StatusCode,
    message: str,
    details: list[error_details_pb2.ErrorInfo | error_details_pb2.RetryInfo],
) -> GrpcFailure:
    status = status_pb2.Status(code=code.value[0], message=message)
    for detail in details:
        packed = any_pb2.Any()
        packed.Pack(detail)
        status.details.append(packed)
    return GrpcFailure(code, message, ((DETAILS_KEY, status.SerializeToString()),))
