"""The service container: everything built once from settings, passed to whoever needs it."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import httpx

from app.agents.llm.extension import Extensions
from app.agents.llm.plugins import PluginError
from app.agents.llm.runtime import LlmRuntime, build_llm_runtime
from app.attachments.admission import LargeBodies, SlotLimits
from app.attachments.pdf import PdfExtractor, PdfLimits
from app.cards.service import CardService
from app.db.engine import Database
from app.db.storage import open_storage
from app.errors import ConfigError
from app.negotiation.irreversible import with_gate
from app.negotiation.peers import PeerClient
from app.negotiation.service import NegotiationService
from app.ops.health import Readiness
from app.ops.metrics import Metrics
from app.peers.client import PeerClients
from app.peers.metrics import PeerMetrics
from app.peers.tools import PeerTools
from app.rpc.calls import CallDispatcher
from app.security.jwks import JwksFetcher
from app.security.keys import SigningKey
from app.security.token import GatewayTokenVerifier
from app.settings import Settings
from app.tenants.registry import TenantDirectory, TenantStore
from app.tracing.provider import OFF as TRACING_OFF
from app.tracing.provider import Tracing
from app.tracing.provider import install as install_tracing

log = logging.getLogger("looping.edge")


class BackgroundService(Protocol):
    """A loop the process runs beside the HTTP server (workers, push delivery)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


@dataclass
class EdgeServices:
    settings: Settings
    db: Database
    key: SigningKey
    cards: CardService
    jwks: JwksFetcher
    verifier: GatewayTokenVerifier
    tenant_store: TenantStore
    tenants: TenantDirectory
    metrics: Metrics
    readiness: Readiness
    gateway_client: httpx.AsyncClient
    background: list[BackgroundService] = field(default_factory=list)
    llm: LlmRuntime | None = None  # what the llm agents' turns share (app.agents.llm.runtime)
    # The bindings' shared dispatcher: ``app.method_table.call_dispatcher(services)``.
    calls: CallDispatcher | None = None
    tracing: Tracing = TRACING_OFF  # this process's tracer provider (app.tracing)
    # The PDF children and their per-process semaphore (issue 55, app.attachments.pdf).
    pdf: PdfExtractor = field(default_factory=lambda: PdfExtractor(PdfLimits()))
    peers: PeerTools | None = None  # the llm agents' A2A tools (app.peers)
    negotiation: NegotiationService | None = None  # negotiating llm agents (app.negotiation)
    # The slots for bodies past the default limit, shared by the bindings (issue 55).
    large_bodies: LargeBodies = field(default_factory=lambda: LargeBodies(SlotLimits()))

    async def aclose(self) -> None:
        self.tracing.shutdown()  # the spans still queued leave before the process does
        await self.gateway_client.aclose()
        if self.peers is not None:
            await self.peers.aclose()
        if self.llm is not None:
            await self.llm.aclose()
        await self.db.dispose()


def gateway_http_client(settings: Settings) -> httpx.AsyncClient:
    """The client for gateway JWKS: no redirects (CONTRACT §3 step 5), bounded pool."""
    return httpx.AsyncClient(
        follow_redirects=False,
        timeout=httpx.Timeout(settings.jwks_deadline_seconds),
        limits=httpx.Limits(max_connections=20, max_keepalive_connections=10),
        trust_env=False,
    )


def build_services(
    settings: Settings,
    *,
    gateway_client: httpx.AsyncClient | None = None,
    db: Database | None = None,
    environ: Mapping[str, str] | None = None,
    peer_transport: httpx.AsyncBaseTransport | None = None,
) -> EdgeServices:
    """Build every service; raises ``ConfigError`` (one line naming the variable) on bad config.

    ``environ``: the process environment, built at the process edge; llm agents read their
    model keys and plugins their secrets from it (none when omitted). ``peer_transport``: under
    the llm agents' calls to their A2A peers (a test's in-process apps; default: the network)."""
    settings.validate_for_serving()
    _warn_if_private_push(settings)
    key = SigningKey.from_jwk_json(settings.signing_key_json())
    tracing = install_tracing(settings)
    metrics = Metrics()
    database = db or Database(settings.database_url, pool_size=settings.db_pool_size)
    client = gateway_client or gateway_http_client(settings)
    jwks = JwksFetcher(settings, client, on_fetch=metrics.jwks_fetched)
    store = TenantStore(database)
    llm = _llm_runtime(settings, database, metrics, environ or {})
    tenants = TenantDirectory(store, refresh_seconds=settings.tenant_refresh_seconds)
    peers = _peer_tools(
        settings, key, database, llm, tenants, metrics, peer_transport or httpx.AsyncHTTPTransport()
    )
    negotiation = _negotiation(settings, database, key, jwks, client, llm, tenants)
    llm = _with_extensions(llm, database, negotiation, peers)
    return EdgeServices(
        settings=settings,
        db=database,
        key=key,
        cards=CardService(settings, key),
        jwks=jwks,
        verifier=GatewayTokenVerifier(settings, jwks),
        tenant_store=store,
        tenants=tenants,
        metrics=metrics,
        readiness=Readiness(db=database, key_loaded=True),
        gateway_client=client,
        llm=llm,
        tracing=tracing,
        pdf=PdfExtractor(PdfLimits.from_settings(settings)),
        peers=peers,
        negotiation=negotiation,
        large_bodies=LargeBodies(SlotLimits.from_settings(settings)),
    )


def _warn_if_private_push(settings: Settings) -> None:
    """One warning at startup while SSRF rules are relaxed for open tenants' pushes."""
    if settings.push_allow_private_targets:
        # Development and tests only (issue 49): open tenants' pushes may reach loopback,
        # private, link-local and metadata addresses, which the SSRF rules exist to refuse.
        log.warning(
            "EDGE_PUSH_ALLOW_PRIVATE_TARGETS is on: open tenants' push targets may be "
            "loopback, private or metadata addresses and plain http (development only)"
        )


def _llm_runtime(
    settings: Settings, db: Database, metrics: Metrics, environ: Mapping[str, str]
) -> LlmRuntime:
    """What the llm agents' turns share; a plugin that fails to load is a ``ConfigError``."""
    try:
        storage = open_storage(db)
        return build_llm_runtime(
            environ,
            failure_text=settings.failure_text,
            sessions=storage.sessions,
            registry=metrics.registry,
            subtasks=storage.subtasks,
        )
    except PluginError as exc:
        raise ConfigError(f"plugins: {exc}") from None


def _peer_tools(
    settings: Settings,
    key: SigningKey,
    db: Database,
    llm: LlmRuntime,
    tenants: TenantDirectory,
    metrics: Metrics,
    transport: httpx.AsyncBaseTransport,
) -> PeerTools:
    """The llm agents' A2A tools (app.peers): peers dialled over ``transport``."""
    storage = open_storage(db)
    return PeerTools(
        PeerClients(settings, key, storage.peer_pins, llm.environ, transport),
        storage.peer_sends,
        party_name=_party_name(tenants),
        metrics=PeerMetrics(metrics.registry),
    )


def _with_extensions(
    llm: LlmRuntime, db: Database, negotiation: NegotiationService, peers: PeerTools
) -> LlmRuntime:
    """``llm`` with negotiation and the A2A tools as its extensions, and its plugins behind
    the irreversible-action gate (app.negotiation.irreversible)."""
    return replace(
        llm,
        extension=Extensions(negotiation, peers),
        plugins=with_gate(llm.plugins, open_storage(db).negotiations),
    )


def _negotiation(
    settings: Settings,
    db: Database,
    key: SigningKey,
    jwks: JwksFetcher,
    client: httpx.AsyncClient,
    llm: LlmRuntime,
    tenants: TenantDirectory,
) -> NegotiationService:
    """Negotiation for the llm agents that enable it (docs/negotiation.md): peers are dialled
    with the gateway client (no redirects, no proxies from the environment)."""

    return NegotiationService(
        open_storage(db).negotiations,
        PeerClient(settings, key, jwks, client, open_storage(db).peer_pins),
        environ=llm.environ,
        http=llm.http_client,
        plugins=llm.plugins,
        party_name=_party_name(tenants),
        clock=time.time,
    )


def _party_name(tenants: TenantDirectory) -> Callable[[str], Awaitable[str]]:
    """The name our tenant's agent goes by with other agents: its card's name."""

    async def party_name(tenant_id: str) -> str:
        record = await tenants.get(tenant_id)
        name = record.manifest.get("name") if record is not None else None
        return name if isinstance(name, str) and name else tenant_id

    return party_name
