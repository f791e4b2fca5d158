"""What went wrong in a call to a peer, as ``PeerCallFailed`` with a stable code: the a2a-sdk
client's and httpx's exceptions translated in one place. The peer's own error text is never
kept (it can carry credentials or diagnostics): only its A2A error name, JSON-RPC code or HTTP
status. ``delivered=False`` only where a send certainly did not reach the peer's agent: the
connection never opened, or the peer refused the request (a 3xx or 4xx, an A2A error that
refuses a request). An internal error, an invalid agent response or a code outside A2A's
table can come after the peer took the message: those are uncertain."""

from __future__ import annotations

import json
import re

import httpx
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.utils.errors import A2AError

from app.errors import PeerCallFailed
from app.peers.transport import EncodedResponse, ResponseTooLarge

_RPC_CODE = re.compile(r"JSON-RPC Error (-?\d{1,6})\b")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
# A2A errors (A2A §5.4) that may be answered after the agent took a message.
_MAYBE_TAKEN = frozenset({"INTERNAL", "INVALID_AGENT_RESPONSE"})


def error_name(exc: A2AError) -> str:
    """``TaskNotCancelableError`` -> ``TASK_NOT_CANCELABLE`` (the A2A reason's form)."""
    return _CAMEL.sub("_", type(exc).__name__.removesuffix("Error")).upper()


def translate(exc: BaseException, what: str) -> PeerCallFailed:
    """``exc`` (raised by ``what``: ``SendMessage``, ``the card``...) for the model."""
    if isinstance(exc, PeerCallFailed):
        return exc
    if isinstance(exc, ResponseTooLarge):
        return PeerCallFailed(f"{what}: the answer is too large", reason="response_too_large")
    if isinstance(exc, EncodedResponse):
        return PeerCallFailed(f"{what}: the answer is encoded", reason="bad_response")
    if isinstance(exc, TimeoutError | A2AClientTimeoutError | httpx.TimeoutException):
        return PeerCallFailed(f"{what}: the peer did not answer in time", reason="timeout")
    if isinstance(exc, A2AError) and not isinstance(exc, A2AClientError):
        name = error_name(exc)
        return PeerCallFailed(
            f"{what}: the peer answered with error {name}",
            reason="peer_error",
            code=name,
            delivered=name in _MAYBE_TAKEN,
        )
    cause = exc.__cause__ if isinstance(exc, A2AClientError) else exc
    if isinstance(cause, httpx.HTTPStatusError):
        return _status(cause.response.status_code, what)
    if isinstance(cause, httpx.ConnectError):
        return PeerCallFailed(
            f"{what}: cannot reach the peer", reason="unreachable", delivered=False
        )
    if isinstance(cause, httpx.TransportError):
        return PeerCallFailed(f"{what}: the connection failed", reason="network_error")
    if isinstance(exc, A2AClientError):
        found = _RPC_CODE.search(str(exc))
        if found is not None:
            return PeerCallFailed(  # a code the SDK does not know: not a known refusal
                f"{what}: the peer answered with error {found.group(1)}",
                reason="peer_error",
                code=found.group(1),
            )
    if isinstance(cause, json.JSONDecodeError) or isinstance(exc, A2AClientError | ValueError):
        return PeerCallFailed(f"{what}: the answer is not valid A2A", reason="bad_response")
    return PeerCallFailed(
        f"{what}: the answer could not be read ({type(exc).__name__})", reason="bad_response"
    )


def _status(status: int, what: str) -> PeerCallFailed:
    if 300 <= status < 400:
        return PeerCallFailed(
            f"{what}: the peer answered with a redirect, which is not followed",
            reason="redirect_refused",
            code=str(status),
            delivered=False,
        )
    if status in (401, 403):
        return PeerCallFailed(
            f"{what}: the peer refused our credentials (HTTP {status})",
            reason="unauthorized",
            code=str(status),
            delivered=False,
        )
    return PeerCallFailed(
        f"{what}: the peer answered HTTP {status}",
        reason="http_error",
        code=str(status),
        delivered=status >= 500,  # a 5xx may come after the agent took the message
    )
