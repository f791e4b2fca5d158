"""Push delivery as a background service of ``serve`` and ``worker`` (CONTRACT §7)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from app.push.deliverer import LEASE_MARGIN_SECONDS, DelivererConfig, PushDeliverer
from app.push.pinning import Resolver, system_resolver
from app.push.policy import RetryPolicy
from app.push.sender import PushSender, push_client
from app.push.store import OutboxStore
from app.tasks.push_secrets import PushSecrets
from app.tenants.registry import TenantDirectory, TenantStore

if TYPE_CHECKING:
    import httpx

    from app.db.engine import Database
    from app.ops.metrics import Metrics
    from app.security.keys import SigningKey
    from app.services import BackgroundService, EdgeServices
    from app.settings import Settings


def build_push_deliverer(services: EdgeServices, *, owner: str) -> BackgroundService | None:
    # kid/jku string-identical to the card's (CONTRACT §7): the jku comes from the card service.
    return create_deliverer(
        settings=services.settings,
        key=services.key,
        jku=services.cards.jku,
        db=services.db,
        metrics=services.metrics,
        owner=owner,
        tenants=services.tenants,
    )


def create_deliverer(
    *,
    settings: Settings,
    key: SigningKey,
    jku: str,
    db: Database,
    metrics: Metrics,
    owner: str,
    client: httpx.AsyncClient | None = None,
    listen: bool = True,
    tenants: TenantDirectory | None = None,
    pinned_client: httpx.AsyncClient | None = None,
    resolver: Resolver = system_resolver,
) -> PushDeliverer:
    """A deliverer; by default with its own shared client (pool limits, no redirects, no proxy
    settings from the environment), closed when the deliverer stops. Open tenants' targets
    outside GATEWAY_ORIGINS go through ``pinned_client`` (no keep-alive, app.push.sender)."""
    timeout = settings.push_timeout_seconds
    concurrency = settings.push_concurrency
    http = client or push_client(timeout=timeout, concurrency=concurrency)
    pinned = pinned_client or push_client(
        timeout=timeout, concurrency=concurrency, keep_alive=False
    )
    directory = tenants or TenantDirectory(
        TenantStore(db), refresh_seconds=settings.tenant_refresh_seconds
    )
    sender = _sender(settings, key, jku, http, pinned, _is_open(directory), resolver)
    return PushDeliverer(
        db=db,
        store=OutboxStore(db, owner=owner, lease_seconds=2 * timeout + LEASE_MARGIN_SECONDS),
        sender=sender,
        policy=RetryPolicy.from_settings(settings),
        metrics=metrics,
        config=DelivererConfig(
            concurrency=settings.push_concurrency,
            poll_seconds=settings.poll_seconds,
            attempt_timeout=timeout,
            listen=listen,
        ),
        client=http,
        pinned_client=pinned,
    )


def _sender(
    settings: Settings,
    key: SigningKey,
    jku: str,
    http: httpx.AsyncClient,
    pinned: httpx.AsyncClient,
    open_tenant: Callable[[str], Awaitable[bool]],
    resolver: Resolver,
) -> PushSender:
    """The signing sender (CONTRACT §7) with the deployment's push-target rules."""
    return PushSender(
        key=key,
        jku=jku,
        allowlist=settings.allowlist,
        # The same secrets the push-config methods sealed the token with (app.tasks).
        secrets=PushSecrets.from_settings(settings, key),
        client=http,
        timeout=settings.push_timeout_seconds,
        targets=settings.push_targets,
        open_tenant=open_tenant,
        pinned_client=pinned,
        resolver=resolver,
    )


def _is_open(directory: TenantDirectory) -> Callable[[str], Awaitable[bool]]:
    """Whether a tenant is open, asked per attempt: a tenant switched back to gateway (or
    disabled) stops reaching anything outside GATEWAY_ORIGINS within
    EDGE_TENANT_REFRESH_SECONDS."""

    async def open_tenant(tenant_id: str) -> bool:
        record = await directory.get(tenant_id)
        return record is not None and record.is_open

    return open_tenant
