"""The tenant store: the ``tenants`` table's records.

``TenantRecordStore`` is the seam between the registry (``app.tenants.registry``: which
definitions are valid, which fields may change, the cached directory the request path reads)
and the backends, which run the same SQLAlchemy statements (``app.db.shared.tenants``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

# tenants.profile values (the rules of each: ``app.tenants.profile``).
GATEWAY: Final = "gateway"
OPEN: Final = "open"


@dataclass(frozen=True)
class TenantRecord:
    """A tenant as stored. ``profile``: who it is served for (``app.tenants.profile``)."""

    id: str
    manifest: Mapping[str, Any]
    agent_kind: str = "echo"
    agent_config: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True
    require_push_config: bool = True
    dedupe_message_ids: bool = True
    profile: str = GATEWAY
    revision: int = 1
    # When this incarnation of the tenant was added: a tenant removed and added again starts
    # over at revision 1, so (created_at, revision) is what identifies its manifest's version.
    created_at: datetime | None = None

    @property
    def card_version(self) -> tuple[datetime | None, int]:
        """What the signed-card cache keys on: changes whenever the manifest may have."""
        return (self.created_at, self.revision)

    @property
    def is_open(self) -> bool:
        """Served for general A2A clients (``app.tenants.profile``)."""
        return self.profile == OPEN


class TenantExists(ValueError):
    pass


class TenantMissing(LookupError):
    pass


class TenantStale(Exception):
    """An update that named a revision the tenant no longer has (optimistic concurrency)."""

    def __init__(self, tenant_id: str, current: int) -> None:
        super().__init__(tenant_id)
        self.current = current


class TenantRecordStore(Protocol):
    async def list(self) -> list[TenantRecord]: ...

    async def get(self, tenant_id: str) -> TenantRecord | None: ...

    async def insert(self, record: TenantRecord, *, at: datetime) -> TenantRecord:
        """Add the tenant at revision 1, created at ``at``; ``TenantExists`` if the id is
        taken."""
        ...

    async def update(
        self,
        tenant_id: str,
        values: Mapping[str, Any],
        *,
        at: datetime,
        expected_revision: int | None = None,
    ) -> TenantRecord:
        """Set ``values`` and bump the revision, unless nothing changes (then the record as
        it is); ``TenantMissing`` if there is no such tenant, ``TenantStale`` if
        ``expected_revision`` is given and is not its revision (checked under the row lock)."""
        ...

    async def delete(self, tenant_id: str, *, expected_revision: int | None = None) -> None:
        """``TenantMissing`` if there is no such tenant, ``TenantStale`` if
        ``expected_revision`` is given and is not its revision."""
        ...
