"""The method table: A2A 1.0 JSON-RPC method names to handlers (A2A §9.4).

Above ``app.rpc`` (the protocol) and ``app.tasks`` (the task methods) so that neither imports
the other's layer back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.attachments.policy import policy_of
from app.card_manifest import published_manifest
from app.rpc.calls import CallDispatcher
from app.rpc.context import MethodTable, RpcCall
from app.tasks.methods import build_task_methods
from app.tasks.stream_methods import build_stream_methods

if TYPE_CHECKING:
    from app.rpc.dispatch import BodyLimit
    from app.security.caller import VerifiedCaller
    from app.services import EdgeServices


def card_methods(services: EdgeServices) -> MethodTable:
    async def get_extended_agent_card(call: RpcCall) -> Any:
        # CONTRACT §4: the card of the addressed tenant (already matched to the token's
        # tenant claim by the dispatcher), signed by the same key, kid and jku as the stub.
        # The stored manifest is validated by the card service on a cache miss only.
        # An agent that negotiates gets the ``negotiate`` skill (issue 51).
        # Attachment opt-ins add their media types to defaultInputModes (issue 55).
        tenant = call.tenant
        manifest = published_manifest(tenant)
        return services.cards.tenant_card(tenant.id, manifest, tenant.card_version)

    return {"GetExtendedAgentCard": get_extended_agent_card}


def build_method_table(services: EdgeServices) -> MethodTable:
    table: MethodTable = {}
    table.update(build_task_methods(services))
    table.update(card_methods(services))
    table.update(build_stream_methods(services))
    return table


def call_dispatcher(services: EdgeServices) -> CallDispatcher:
    """The process's one ``CallDispatcher``, built on first use and kept on ``services``: every
    binding (JSON-RPC, HTTP+JSON, gRPC) calls through the same method table, so the stream
    bounds per identity and per process hold across bindings."""
    if services.calls is None:
        services.calls = CallDispatcher(
            tenants=services.tenants, methods=build_method_table(services)
        )
    return services.calls


def tenant_body_limit(services: EdgeServices) -> BodyLimit:
    """The request body limit per verified caller, on all three bindings:
    ``EDGE_MAX_IMAGE_BODY_BYTES`` / ``EDGE_MAX_DOCUMENT_BODY_BYTES`` when the token's tenant
    accepts images / documents (issue 55), else the default. Asked only after the token is
    verified, so an unauthenticated client never gets the larger limit."""
    images = services.settings.max_image_body_bytes
    documents = services.settings.max_document_body_bytes

    async def limit(caller: VerifiedCaller, default: int) -> int:
        if caller.tenant is None:
            return default
        try:
            record = await services.tenants.get(caller.tenant)
        except Exception:
            # Fails closed to the default; the call's own tenant lookup then answers the
            # fault as -32603 without detail (CONTRACT §3).
            return default
        if record is None or not record.enabled:
            return default
        policy = policy_of(record.agent_config)
        return policy.body_limit(default, images=images, documents=documents)

    return limit
