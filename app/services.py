"""The service container: everything built once from settings, passed to whoever needs it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from app.cards.service import CardService
from app.db.engine import Database
from app.ops.health import Readiness
from app.ops.host_idle import HostIdle, auto_idle_poll_microseconds
from app.ops.idle_poll import IdlePollers
from app.ops.metrics import Metrics
from app.security.jwks import JwksFetcher
from app.security.keys import SigningKey
from app.security.token import GatewayTokenVerifier
from app.settings import Settings
from app.tenants.registry import TenantDirectory, TenantStore
from app.worker.wakeup import Wakeup

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
    idle_pollers: IdlePollers = field(default_factory=IdlePollers.off)
    background: list[BackgroundService] = field(default_factory=list)
    wakeup: Wakeup = field(default_factory=Wakeup)

    async def aclose(self) -> None:
        await self.gateway_client.aclose()
        await self.db.dispose()


def gateway_http_client(settings: Settings) -> httpx.AsyncClient:
    """The client for gateway JWKS: no redirects (CONTRACT §3 step 5), bounded pool."""
    return httpx.AsyncClient(
        follow_redirects=False,
        timeout=httpx.Timeout(settings.jwks_deadline_seconds),
        limits=httpx.Limits(max_connections=20, max_keepalive_connections=10),
        trust_env=False,
    )


def idle_poll_seconds(settings: Settings, host: HostIdle | None = None) -> float:
    """The idle-poll window: ``EDGE_IDLE_POLL_MICROSECONDS`` when set, else what this host's
    idle CPUs call for (``app.ops.host_idle``, read once here)."""
    micros = settings.idle_poll_microseconds
    if micros is None:
        host = host or HostIdle.read()
        micros = auto_idle_poll_microseconds(host)
        log.info(
            "idle_poll.auto",
            extra={"outcome": f"{micros} us ({host.describe()})"},
        )
    return micros / 1e6


def build_services(
    settings: Settings,
    *,
    gateway_client: httpx.AsyncClient | None = None,
    db: Database | None = None,
    host: HostIdle | None = None,
) -> EdgeServices:
    """Build every service; raises ``ConfigError`` (one line naming the variable) on bad config.
    ``host``: how this machine's idle CPUs wait (read from /sys when not given)."""
    settings.validate_for_serving()
    key = SigningKey.from_jwk_json(settings.signing_key_json())
    metrics = Metrics()
    pollers = IdlePollers.build(idle_poll_seconds(settings, host), observer=metrics)
    database = db or Database(
        settings.database_url, pool_size=settings.db_pool_size, activity=pollers.statement
    )
    client = gateway_client or gateway_http_client(settings)
    jwks = JwksFetcher(settings, client, on_fetch=metrics.jwks_fetched)
    store = TenantStore(database)
    return EdgeServices(
        settings=settings,
        db=database,
        key=key,
        cards=CardService(settings, key),
        jwks=jwks,
        verifier=GatewayTokenVerifier(settings, jwks),
        tenant_store=store,
        tenants=TenantDirectory(store, refresh_seconds=settings.tenant_refresh_seconds),
        metrics=metrics,
        readiness=Readiness(db=database, key_loaded=True),
        gateway_client=client,
        idle_pollers=pollers,
    )
