"""Admission of large request bodies (issue 55): the edge's memory stays bounded however many
attachment-sized bodies arrive at once.

A body allowed past the default limit (a tenant that opted in to attachments) is read and
handled only inside a slot: at most ``slots`` in this process, at most ``per_tenant`` for one
tenant, so one tenant cannot take every slot. A request that finds no slot within
``wait_seconds`` is refused with 429 and ``Retry-After`` before its body is read; requests
under the default limit never wait here, so every other tenant is served meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from app.errors import TooManyRequests
from app.settings import Settings


@dataclass(frozen=True, slots=True)
class SlotLimits:
    slots: int = 4
    per_tenant: int = 2
    wait_seconds: float = 10.0

    @classmethod
    def from_settings(cls, settings: Settings) -> SlotLimits:
        return cls(
            settings.max_large_bodies,
            settings.max_large_bodies_per_tenant,
            settings.large_body_wait_seconds,
        )


class LargeBodies:
    """The slots; one per process, created lazily on the running event loop."""

    def __init__(self, limits: SlotLimits) -> None:
        self.limits = limits
        self.in_flight = 0
        self._tenants: dict[str, int] = {}
        self._changed: asyncio.Condition | None = None

    def _free(self, tenant: str) -> bool:
        limits = self.limits
        return self.in_flight < limits.slots and self._tenants.get(tenant, 0) < limits.per_tenant

    @contextlib.asynccontextmanager
    async def admitted(self, tenant: str) -> AsyncIterator[None]:
        """Holds a slot for ``tenant`` while the body is read and handled."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        changed = self._changed
        async with changed:
            try:
                if not self._free(tenant):  # a free slot is taken even with no wait allowed
                    await asyncio.wait_for(
                        changed.wait_for(lambda: self._free(tenant)), self.limits.wait_seconds
                    )
            except TimeoutError:
                raise TooManyRequests(
                    "too many large requests in flight; retry later",
                    retry_after_seconds=1,
                    reason="large_bodies_busy",
                ) from None
            self.in_flight += 1
            self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
        try:
            yield
        finally:
            async with changed:
                self.in_flight -= 1
                left = self._tenants[tenant] - 1
                if left:
                    self._tenants[tenant] = left
                else:
                    del self._tenants[tenant]
                changed.notify_all()


def admitted(
    slots: LargeBodies | None, tenant: str | None, limit: int, default: int
) -> AbstractAsyncContextManager[None]:
    """A slot of ``slots`` for a request whose body limit is ``limit``: none needed (and none
    taken) within the ``default`` limit."""
    if slots is None or limit <= default:
        return contextlib.nullcontext()
    return slots.admitted(tenant or "")
