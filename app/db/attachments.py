"""The attachment store: what an accepted turn carried, for its agent (issue 55).

The rows are written by the accept store in the turn's own unit of work
(``app.db.accepts.NewTurn.attachments``) and removed with their task by retention. Reads are
scoped like every other: another caller's attachments are indistinguishable from none.
"""

from __future__ import annotations

from typing import Protocol

from app.attachments.stored import Attachment
from app.security.caller import CallerScope


class AttachmentStore(Protocol):
    async def of_message(
        self, scope: CallerScope, task_id: str, message_id: str
    ) -> list[Attachment]:
        """The attachments of the task's message ``message_id`` in part order (the latest
        turn's, when a tenant without deduplication reused the id); empty if none."""
        ...
