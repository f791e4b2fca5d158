"""The attachment store on SQLAlchemy, for both backends (``app.db.attachments``)."""

from __future__ import annotations

from sqlalchemy import func, select

from app.attachments.stored import Attachment
from app.db.engine import Database
from app.db.models import TurnAttachmentRow
from app.security.caller import CallerScope


class SharedAttachments:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def of_message(
        self, scope: CallerScope, task_id: str, message_id: str
    ) -> list[Attachment]:
        a = TurnAttachmentRow
        of_message = (
            a.tenant == scope.tenant,
            a.task_id == task_id,
            a.identity == scope.identity,
            a.message_id == message_id,
        )
        latest = select(func.max(a.turn_id)).where(*of_message).scalar_subquery()
        query = select(a).where(*of_message, a.turn_id == latest).order_by(a.ordinal)
        async with self._db.transaction() as session:
            rows = (await session.execute(query)).scalars().all()
        return [
            Attachment(
                index=r.ordinal,
                kind=r.kind,
                media_type=r.media_type,
                filename=r.filename,
                data=bytes(r.data),
                text=r.text,
                pages=r.pages,
            )
            for r in rows
        ]
