"""The push-config store: a task's push notification configs, scoped to the caller.

``PushConfigStore`` is the seam between the push-config methods (``app.tasks.push_configs``:
validation, sealing the secrets, the answers and their cursor) and the backends, which run
the same SQLAlchemy statements (``app.db.shared.push_configs``). Every operation first finds
the task in the caller scope and raises ``TaskNotFound`` when it is not there: another
caller's task is ``-32001`` exactly like a missing one. Secrets never leave the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.security.caller import CallerScope


@dataclass(frozen=True)
class SealedPush:
    """A push config as stored: its secrets already encrypted (``app.tasks.push_secrets``)."""

    id: str | None
    url: str
    token_enc: str | None
    auth_scheme: str | None
    auth_credentials_enc: str | None


@dataclass(frozen=True)
class PushConfigView:
    """A stored config as it may be answered: no token, no credentials."""

    tenant: str
    id: str
    task_id: str
    url: str
    auth_scheme: str | None


class PushConfigStore(Protocol):
    async def put(self, scope: CallerScope, task_id: str, config: SealedPush) -> PushConfigView:
        """Insert or replace one config of the task."""
        ...

    async def get(self, scope: CallerScope, task_id: str, config_id: str) -> PushConfigView | None:
        """The config; None when the task has none of that id."""
        ...

    async def page(
        self, scope: CallerScope, task_id: str, *, after: str | None, limit: int
    ) -> list[PushConfigView]:
        """Up to ``limit`` configs of the task by id, after ``after``."""
        ...

    async def delete(self, scope: CallerScope, task_id: str, config_id: str) -> None:
        """Remove the config (if there) and cancel its undelivered pushes."""
        ...
