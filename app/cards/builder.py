"""Agent Card content (CONTRACT §4): the stub card of the deployment and one card per tenant.

Cards are built as plain protobuf-JSON dicts (camelCase) and signed by ``app.cards.signing``.
Every URL comes from configuration (``PUBLIC_URL``), never from a request (CONTRACT §2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.interfaces import JSONRPC, served_interfaces
from app.settings import Settings
from app.tenants.manifest import EDGE_CAPABILITY_FLAGS, TenantManifest

PROTOCOL_VERSION = "1.0"  # the A2A protocol version, never the agent's own (REFERENCE-CASES 53)
PROTOCOL_BINDING = JSONRPC
SCHEME_NAME = "gatewayJwt"
DEFAULT_MODES = ("text/plain",)


@dataclass(frozen=True)
class CardOptions:
    """Build-time choices about card content.

    ``advertise_security_schemes``: publish the gateway-JWT bearer scheme (the contract
    default). The reference vector was produced without it, so its test turns it off.
    ``list_tenants``: append the registered tenant ids to the stub description, so an operator
    reading the public card knows which ``tenant`` values exist (CONTRACT §4 allows it).
    ``deployment_skill``: give the stub card one tenant-neutral skill describing the
    deployment; A2A §5.7 makes ``skills`` a required array with at least one element (the empty
    list is pruned on output). The reference vector was produced without it.
    """

    advertise_security_schemes: bool = True
    list_tenants: bool = True
    deployment_skill: bool = True
    # ``advertise_streaming``: ``capabilities.streaming`` as the edge serves it (true). The
    # reference vector was produced when the edge did not stream (false).
    advertise_streaming: bool = True
    # ``other_bindings``: list HTTP+JSON (and gRPC when configured) after JSON-RPC. The
    # reference vector was produced when the edge served JSON-RPC alone.
    other_bindings: bool = True


def _capabilities(flags: dict[str, Any], options: CardOptions) -> dict[str, Any]:
    capabilities = dict(flags)
    capabilities["streaming"] = options.advertise_streaming
    return capabilities


def _security(options: CardOptions) -> dict[str, Any]:
    fields: dict[str, Any] = {
        # Present on every card. Note: ``{"schemes": {"gatewayJwt": {}}}`` prunes to nothing in
        # the canonical form, so this member is served but not covered by the signature.
        "securityRequirements": [{"schemes": {SCHEME_NAME: {}}}],
    }
    if options.advertise_security_schemes:
        fields["securitySchemes"] = {
            SCHEME_NAME: {"httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "JWT"}}
        }
    return fields


def _interfaces(
    settings: Settings, tenant: str | None, options: CardOptions
) -> list[dict[str, str]]:
    """``supportedInterfaces``: JSON-RPC first, then the other bindings (``app.interfaces``);
    each names the tenant on a tenant card."""
    interfaces = served_interfaces(settings)
    if not options.other_bindings:
        interfaces = interfaces[:1]
    out = []
    for served in interfaces:
        interface = {
            "url": served.url,
            "protocolBinding": served.binding,
            "protocolVersion": PROTOCOL_VERSION,
        }
        if tenant is not None:
            interface["tenant"] = tenant
        out.append(interface)
    return out


def stub_description(base: str, tenant_ids: Sequence[str], options: CardOptions) -> str:
    if not options.list_tenants or not tenant_ids:
        return base
    return f"{base} Tenants: {', '.join(tenant_ids)}."


def build_stub_card(
    settings: Settings, tenant_ids: Sequence[str], options: CardOptions
) -> dict[str, Any]:
    """The deployment's public card: names no tenant in ``supportedInterfaces`` (CONTRACT §4)."""
    return {
        "name": settings.card_name,
        "description": stub_description(settings.card_description, tenant_ids, options),
        "supportedInterfaces": _interfaces(settings, None, options),
        "version": settings.card_version,
        "capabilities": _capabilities(EDGE_CAPABILITY_FLAGS, options),
        **_security(options),
        "defaultInputModes": list(DEFAULT_MODES),
        "defaultOutputModes": list(DEFAULT_MODES),
        "skills": [_deployment_skill(settings)] if options.deployment_skill else [],
    }


def _deployment_skill(settings: Settings) -> dict[str, Any]:
    """The stub card's one skill: what the deployment does, naming no tenant."""
    return {
        "id": "edge",
        "name": settings.card_name,
        "description": (
            f"{settings.card_description} Address a tenant's agent with the request's "
            "tenant parameter; its own card lists its skills."
        ),
        "tags": ["a2a", "multi-tenant"],
    }


def build_tenant_card(
    settings: Settings, tenant_id: str, manifest: TenantManifest, options: CardOptions
) -> dict[str, Any]:
    """A tenant's card: its manifest, the same endpoint, interface ``tenant`` set (CONTRACT §4)."""
    fields = manifest.card_fields()
    return {
        "name": fields["name"],
        "description": fields["description"],
        "supportedInterfaces": _interfaces(settings, tenant_id, options),
        "version": fields["version"],
        "capabilities": _capabilities(fields["capabilities"], options),
        **_security(options),
        "defaultInputModes": fields["defaultInputModes"],
        "defaultOutputModes": fields["defaultOutputModes"],
        "skills": fields.get("skills", []),
    }
