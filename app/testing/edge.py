"""An in-process edge for tests: real app, real database, a gateway kit for tokens.

Tenant authors use it to drive their agent through the real verification and RPC path::

    async with edge_harness(database_url) as edge:
        await edge.add_tenant("demo", agent="echo")
        response = await edge.rpc("GetExtendedAgentCard", {})
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.agents.registry import AgentRegistry
from app.interfaces import HTTP_JSON, interface_url
from app.main import create_app
from app.runtime import attach_background
from app.security.keys import generate_private_jwk
from app.services import EdgeServices, build_services
from app.settings import Settings, load_settings
from app.tenants.registry import TenantRecord
from app.testing.gateway import GatewayKit, transport_for

EDGE_PUBLIC_URL = "http://localhost"


def demo_manifest(name: str = "Demo agent") -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} for tests",
        "version": "1.0.0",
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": "chat",
                "name": "Chat",
                "description": "Answers messages",
                "tags": ["chat"],
            }
        ],
    }


def harness_settings(database_url: str, gateway: GatewayKit, **overrides: Any) -> Settings:
    """Edge settings for tests (named so that pytest never collects it from an import)."""
    values: dict[str, Any] = {
        "signing_key": json.dumps(generate_private_jwk("edge-test-key")),
        "gateway_origins": [gateway.origin],
        "public_url": EDGE_PUBLIC_URL,
        "database_url": database_url,
        "allow_loopback_http": True,
        "log_json": False,
    }
    values.update(overrides)
    return load_settings(**values)


@dataclass
class EdgeHarness:
    settings: Settings
    services: EdgeServices
    client: httpx.AsyncClient
    gateway: GatewayKit
    default_tenant: str = "demo"
    identity: dict[str, Any] = field(
        default_factory=lambda: {"key": "user-1", "name": "Test User", "kind": "user"}
    )
    # The ASGI app itself, for tests that drive a response as it is sent (SSE streams: the
    # httpx transport hands back a body only once it ended).
    app: Any = None

    @property
    def endpoint(self) -> str:
        return self.settings.endpoint_url

    async def add_tenant(
        self,
        tenant_id: str | None = None,
        *,
        manifest: Mapping[str, Any] | None = None,
        agent: str = "echo",
        agent_config: Mapping[str, Any] | None = None,
        require_push_config: bool = True,
        dedupe_message_ids: bool = True,
        profile: str = "gateway",
    ) -> TenantRecord:
        record = await self.services.tenant_store.add(
            TenantRecord(
                id=tenant_id or self.default_tenant,
                manifest=dict(manifest or demo_manifest()),
                agent_kind=agent,
                agent_config=dict(agent_config or {}),
                require_push_config=require_push_config,
                dedupe_message_ids=dedupe_message_ids,
                profile=profile,
            )
        )
        self.services.tenants.invalidate()
        return record

    def token(
        self, *, tenant: str | None = None, identity: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> str:
        return self.gateway.mint(
            audience=self.endpoint,
            tenant=tenant if tenant is not None else self.default_tenant,
            identity=dict(identity if identity is not None else self.identity),
            **kwargs,
        )

    def headers(self, token: str | None = None, **kwargs: Any) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {token or self.token(**kwargs)}",
            "A2A-Version": "1.0",
            "Content-Type": "application/json",
        }

    async def rpc(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        tenant: str | None = None,
        token: str | None = None,
        identity: Mapping[str, Any] | None = None,
        request_id: Any = 1,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        body_params = dict(params or {})
        body_params.setdefault("tenant", tenant or self.default_tenant)
        hdrs = (
            self.headers(token, tenant=tenant, identity=identity)
            if token is None
            else (self.headers(token))
        )
        hdrs.update(headers or {})
        doc = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
        return await self.client.post(self.settings.rpc_path, json=doc, headers=hdrs)

    @property
    def rest_url(self) -> str:
        """The HTTP+JSON interface's url (A2A §11): the base of ``/{tenant}/...`` and the
        audience of its tokens."""
        return interface_url(self.settings, HTTP_JSON)

    def rest_token(self, **kwargs: Any) -> str:
        """``token`` with the HTTP+JSON interface's audience."""
        kwargs.setdefault("audience", self.rest_url)
        tenant = kwargs.pop("tenant", None)
        identity = kwargs.pop("identity", None)
        return self.gateway.mint(
            tenant=tenant if tenant is not None else self.default_tenant,
            identity=dict(identity if identity is not None else self.identity),
            **kwargs,
        )

    async def rest(
        self,
        http_method: str,
        path: str,
        *,
        tenant: str | None = None,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """One HTTP+JSON request to ``/{tenant}{path}`` with a token for that interface."""
        hdrs = self.headers(token or self.rest_token(tenant=tenant))
        hdrs.update(headers or {})
        url = f"/{tenant or self.default_tenant}{path}"
        return await self.client.request(http_method, url, json=json, params=params, headers=hdrs)

    async def result(
        self, method: str, params: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """``rpc`` that requires a JSON-RPC success and returns ``result``."""
        response = await self.rpc(method, params, **kwargs)
        doc = response.json()
        if response.status_code != 200 or "error" in doc:
            raise AssertionError(f"{method} failed: {response.status_code} {doc}")
        return doc["result"]


@asynccontextmanager
async def edge_harness(
    database_url: str,
    *,
    gateway: GatewayKit | None = None,
    background: bool = False,
    agents: AgentRegistry | None = None,
    peers: Sequence[GatewayKit] = (),
    **settings_overrides: Any,
) -> AsyncIterator[EdgeHarness]:
    """Build the real app over ``database_url`` (already migrated: ``upgrade_to_head``) with a
    gateway kit whose JWKS is served in-process; ``background=True`` also runs workers and push
    delivery, with ``agents`` (an ``AgentRegistry`` holding the author's own kinds) in place of
    the built-in ones when given. A ``python`` tenant (``agent="python"``,
    ``agent_config={"entry": "package.module:factory"}``) needs no registry of its own.
    ``peers``: kits standing for peer edges (CONTRACT §10), listed in ``PEER_ORIGINS`` unless
    the overrides say otherwise, their JWKS served beside the gateway's."""
    kit = gateway or GatewayKit()
    if peers:
        settings_overrides.setdefault("peer_origins", [p.origin for p in peers])
    settings = harness_settings(database_url, kit, **settings_overrides)
    client = httpx.AsyncClient(transport=transport_for(kit, *peers))
    services = build_services(settings, gateway_client=client)
    if background:
        attach_background(services, agents=agents)
    app = create_app(services)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=EDGE_PUBLIC_URL) as client:
        for service in services.background:
            await service.start()
        try:
            yield EdgeHarness(
                settings=settings, services=services, client=client, gateway=kit, app=app
            )
        finally:
            for service in reversed(services.background):
                await service.stop()
            await services.aclose()
