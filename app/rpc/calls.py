"""The transport-neutral call: one verified caller, one tenant, one A2A method, one answer.

Every binding (JSON-RPC ``app.rpc.dispatch``, HTTP+JSON ``app.http.rest``, gRPC) verifies the
token with the audience of its own interface, reads its request into protobuf-JSON params,
and hands them here; the tenant rules (CONTRACT §3 step 10), the ``A2A-Version`` check (step
11), the method lookup (step 12) and the handler are the same for all of them. Each binding
then renders the result or the error in its own shape (A2A §5.4 maps the one error tree to
JSON-RPC codes, HTTP statuses and gRPC statuses: ``RpcError.http_status``/``grpc_status``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from app.errors import (
    HttpRefusal,
    InternalError,
    InvalidParams,
    MethodNotFound,
    RpcError,
    Unauthorized,
    VersionNotSupported,
)
from app.rpc.context import MethodTable, RpcCall
from app.rpc.envelope import RequestId
from app.security.caller import CallerScope, VerifiedCaller
from app.tenants.registry import TenantRecord
from app.text import shown
from app.tracing.spans import TENANT, annotate

log = logging.getLogger("looping_edge.rpc")

SUPPORTED_VERSIONS = ("1.0",)
# A2A §3.6.2: a request without the header is a 0.3 request.
DEFAULT_VERSION = "0.3"

# CONTRACT §10 (issues 51, 54): what a peer edge's token may call, scoped to its namespaced
# identity: its card, sending, reading, following (an A2A tool waiting on a task it sent) and
# canceling its own tasks; listing, push configs and streamed sends are the gateway's or a
# client's.
PEER_METHODS = frozenset(
    {"GetExtendedAgentCard", "SendMessage", "GetTask", "SubscribeToTask", "CancelTask"}
)


class TenantLookup(Protocol):
    async def get(self, tenant_id: str) -> TenantRecord | None: ...


class CallDispatcher:
    """``await calls.dispatch(caller, tenant, method, params, version=...)``: the one entry
    point of every binding.

    - ``caller``: the ``VerifiedCaller`` the binding's token verifier returned (verified with
      the audience of the interface that was called: ``app.security.audience``).
    - ``tenant``: the tenant the request addresses (``params.tenant`` on JSON-RPC, the path
      prefix on HTTP+JSON, the request's ``tenant`` field on gRPC); ``None``/``""`` if absent.
    - ``method``: the A2A 1.0 method name (A2A §9.4, the same names as the gRPC service's
      methods): ``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``ListTasks``,
      ``CancelTask``, ``SubscribeToTask``, ``Create/Get/Delete TaskPushNotificationConfig``,
      ``ListTaskPushNotificationConfigs``, ``GetExtendedAgentCard``.
    - ``params``: the request message as protobuf-JSON (camelCase members, enum names), e.g.
      ``json_format.MessageToDict(GetTaskRequest(...))``; a ``tenant`` member is ignored.
    - ``version``: the ``A2A-Version`` header or metadata value, ``None`` when absent.

    Returns the result as a JSON value (a dict) or a ``RawJson`` (JSON text already encoded,
    ``json.loads(result.text)`` to get the value); for ``SendStreamingMessage`` and
    ``SubscribeToTask`` a ``StreamResult`` whose ``next()`` gives ``StreamResponse`` values
    (dicts, or ``RawJson`` for updates encoded once for many streams) and which the caller
    must ``aclose()``. Raises an ``RpcError`` (A2A code table;
    ``http_status``/``grpc_status`` give the other bindings' codes) or an ``HttpRefusal``
    (``Unauthorized`` when the token's tenant claim is not the addressed tenant). Anything else
    a handler raises is logged and raised as ``InternalError`` (never shown to the caller).
    """

    def __init__(self, *, tenants: TenantLookup, methods: MethodTable) -> None:
        self._tenants = tenants
        self._methods = methods

    def knows(self, method: str) -> bool:
        return method in self._methods

    async def dispatch(
        self,
        caller: VerifiedCaller,
        tenant: object,
        method: str,
        params: dict[str, Any],
        *,
        version: str | None,
        request_id: RequestId = None,
    ) -> Any:
        try:
            return await self._route(caller, tenant, method, params, version, request_id)
        except (RpcError, HttpRefusal):
            raise
        except Exception:
            # -32603 is what the gateway retries: only real internal faults get it (a handler's,
            # or the tenant lookup's when the database is down), and the text never carries the
            # exception (CONTRACT §3).
            log.exception("rpc call failed", extra={"method": method})
            raise InternalError("internal error") from None

    async def _route(
        self,
        caller: VerifiedCaller,
        tenant: object,
        method: str,
        params: dict[str, Any],
        version: str | None,
        request_id: RequestId,
    ) -> Any:
        """CONTRACT §3 steps 10-12, then the handler."""
        record = await self._tenant(caller, tenant)
        # The server span (tracing on): the method and the verified tenant, never the token.
        annotate(
            {"rpc.method": method if method in self._methods else "unknown", TENANT: record.id}
        )
        requested = (version or "").strip() or DEFAULT_VERSION
        if requested not in SUPPORTED_VERSIONS:
            raise VersionNotSupported(
                f"A2A-Version '{shown(requested, 16)}' is not supported; "
                f"supported versions: {', '.join(SUPPORTED_VERSIONS)}",
                metadata={"supportedVersions": ",".join(SUPPORTED_VERSIONS)},
            )
        handler = self._methods.get(method)
        if caller.peer and handler is not None and method not in PEER_METHODS:
            raise MethodNotFound(
                f"method '{shown(method)}' is not available to peer callers",
                reason="peer_method_not_allowed",
            )
        if handler is None:
            raise MethodNotFound(f"method '{shown(method)}' is not supported")
        call = RpcCall(
            caller=caller,
            scope=CallerScope(tenant=record.id, identity=caller.identity_key),
            tenant=record,
            method=method,
            params=params,
            request_id=request_id,
        )
        return await handler(call)

    async def _tenant(self, caller: VerifiedCaller, addressed: object) -> TenantRecord:
        if not isinstance(addressed, str) or not addressed:
            raise InvalidParams(
                "params.tenant is required: name the agent this call addresses "
                "(GetExtendedAgentCard with params.tenant returns that agent's card)",
                reason="tenant_required",
            )
        # CONTRACT §3 step 10: an absent or non-string claim is never a wildcard.
        if caller.tenant != addressed:
            raise Unauthorized(
                f"token authorizes tenant '{shown(caller.tenant or '<none>')}', "
                f"but the request addressed '{shown(addressed)}'",
                reason="tenant_mismatch",
            )
        record = await self._tenants.get(addressed)
        if record is None:
            raise InvalidParams(f"unknown tenant '{shown(addressed)}'", reason="unknown_tenant")
        if caller.peer and not record.is_open:
            # CONTRACT §10: peer tokens only on open tenants; to a gateway tenant a peer's
            # token is no token at all (the same 401 as an origin on neither list).
            raise Unauthorized(
                "peer tokens are accepted only by open tenants", reason="peer_not_allowed"
            )
        return record
