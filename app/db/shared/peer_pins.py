"""The peer pins store in SQLAlchemy (``app.db.peer_pins.PeerPinStore``), both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, select

from app.db.engine import Database
from app.db.models.negotiations import PeerPinRow
from app.db.peer_pins import PeerPin


class SharedPeerPins:
    """``insert``: the dialect's ``insert`` (it has ``on_conflict_do_nothing``)."""

    def __init__(self, db: Database, insert: Callable[[Any], Any]) -> None:
        self._db = db
        self._insert = insert

    async def pinned(self, origin: str) -> tuple[str, str] | None:
        async with self._db.transaction() as s:
            row = await s.get(PeerPinRow, origin)
            return (row.jku, row.kid) if row is not None else None

    async def pin(self, origin: str, jku: str, kid: str) -> tuple[str, str]:
        statement = (
            self._insert(PeerPinRow)
            .values(origin=origin, jku=jku, kid=kid)
            .on_conflict_do_nothing(index_elements=["origin"])
        )
        async with self._db.transaction() as s:
            await s.execute(statement)
            row = (
                await s.execute(select(PeerPinRow).where(PeerPinRow.origin == origin))
            ).scalar_one()
            return (row.jku, row.kid)

    async def all(self) -> list[PeerPin]:
        async with self._db.transaction() as s:
            rows = (await s.execute(select(PeerPinRow).order_by(PeerPinRow.origin))).scalars()
            return [PeerPin(r.origin, r.jku, r.kid, r.pinned_at) for r in rows]

    async def remove(self, origin: str) -> bool:
        async with self._db.transaction() as s:
            result = await s.execute(delete(PeerPinRow).where(PeerPinRow.origin == origin))
            return bool(getattr(result, "rowcount", 0) == 1)
