"""The peer sends store in SQLAlchemy (``app.db.peer_sends.PeerSendStore``), both backends."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import func, select, update

from app.db.engine import Database
from app.db.models.peer_sends import PeerSendRow
from app.db.peer_sends import ACKED, INTENT, REFUSED, NewPeerSend, PeerSend


def _send(row: PeerSendRow) -> PeerSend:
    return PeerSend(
        call_key=row.call_key,
        agent=row.agent,
        url=row.url,
        message_id=row.message_id,
        status=row.status,
        peer_task_id=row.peer_task_id,
        answer=row.answer,
    )


class SharedPeerSends:
    """``insert``: the dialect's ``insert`` (it has ``on_conflict_do_nothing``)."""

    def __init__(self, db: Database, insert: Callable[[Any], Any]) -> None:
        self._db = db
        self._insert = insert

    async def find(self, tenant: str, call_key: str) -> PeerSend | None:
        async with self._db.transaction() as s:
            row = await s.get(PeerSendRow, (tenant, call_key))
            return _send(row) if row is not None else None

    async def sent(self, tenant: str, identity: str, url: str, peer_task_id: str) -> bool:
        statement = (
            select(PeerSendRow.call_key)
            .where(
                PeerSendRow.tenant == tenant,
                PeerSendRow.identity == identity,
                PeerSendRow.url == url,
                PeerSendRow.peer_task_id == peer_task_id,
            )
            .limit(1)
        )
        async with self._db.transaction() as s:
            return (await s.execute(statement)).first() is not None

    async def record_intent(self, send: NewPeerSend) -> PeerSend:
        statement = (
            self._insert(PeerSendRow)
            .values(
                tenant=send.tenant,
                call_key=send.call_key,
                identity=send.identity,
                task_id=send.task_id,
                agent=send.agent,
                url=send.url,
                message_id=send.message_id,
                status=INTENT,
            )
            .on_conflict_do_nothing(index_elements=["tenant", "call_key"])
        )
        async with self._db.transaction() as s:
            await s.execute(statement)
            held = select(PeerSendRow).where(
                PeerSendRow.tenant == send.tenant, PeerSendRow.call_key == send.call_key
            )
            return _send((await s.execute(held)).scalar_one())

    async def acknowledge(
        self,
        tenant: str,
        call_key: str,
        *,
        peer_task_id: str | None,
        answer: Mapping[str, Any] | None,
    ) -> bool:
        return await self._settle(
            tenant,
            call_key,
            status=ACKED,
            peer_task_id=peer_task_id,
            answer=dict(answer) if answer is not None else None,
        )

    async def refuse(self, tenant: str, call_key: str, answer: Mapping[str, Any]) -> bool:
        return await self._settle(tenant, call_key, status=REFUSED, answer=dict(answer))

    async def _settle(self, tenant: str, call_key: str, **values: Any) -> bool:
        statement = (
            update(PeerSendRow)
            .where(
                PeerSendRow.tenant == tenant,
                PeerSendRow.call_key == call_key,
                PeerSendRow.status == INTENT,
            )
            .values(updated_at=func.now(), **values)
        )
        async with self._db.transaction() as s:
            result = await s.execute(statement)
            return bool(getattr(result, "rowcount", 0) == 1)
