"""The negotiations store in SQLAlchemy (``app.db.negotiations.NegotiationStore``), on both
backends: the claim is one ``INSERT … ON CONFLICT DO NOTHING`` against the binding index,
every change one compare-and-set on ``version``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import delete, func, select, update

from app.db.engine import Database
from app.db.models.negotiations import NegotiationRow, NegotiationTurnRow
from app.db.negotiations import (
    ENDED,
    OPENING,
    Change,
    Claim,
    Negotiation,
    NewNegotiation,
    TurnRecord,
    binds,
)


def _negotiation(row: NegotiationRow) -> Negotiation:
    return Negotiation(
        id=row.id,
        tenant=row.tenant,
        identity=row.identity,
        direction=row.direction,
        counterparty=row.counterparty,
        intent=row.intent,
        origin_key=row.origin_key,
        state=row.state,
        turns=row.turns,
        binding=bool(row.binding),
        version=row.version,
        task_id=row.task_id,
        context_id=row.context_id,
        task_state=row.task_state,
        last_offer=dict(row.last_offer) if row.last_offer is not None else None,
        verdict=row.verdict,
        basis=row.basis,
        reason=row.reason,
        terms=dict(row.terms) if row.terms is not None else None,
        pending=row.pending,
        guidance=tuple(str(g) for g in row.guidance or ()),
        objective=row.objective,
        detail=dict(row.detail or {}),
        updated_at=row.updated_at,
    )


def _values(change: Change) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in (
        "state",
        "turns",
        "task_id",
        "context_id",
        "task_state",
        "last_offer",
        "basis",
        "reason",
        "terms",
        "pending",
    ):
        value = getattr(change, name)
        if value is not None:
            values[name] = value
    if change.verdict is not None:
        values["verdict"] = change.verdict
        values["binding"] = binds(change.verdict)
    if change.clear_verdict:
        values.update(verdict=None, basis=None, reason=None, terms=None, binding=True)
    if change.clear_pending:
        values["pending"] = None
    if change.guidance is not None:
        values["guidance"] = list(change.guidance)
    if change.detail is not None:
        values["detail"] = dict(change.detail)
    return values


class SharedNegotiations:
    """``insert``: the dialect's ``insert`` (it has ``on_conflict_do_nothing``)."""

    def __init__(self, db: Database, insert: Callable[[Any], Any]) -> None:
        self._db = db
        self._insert = insert

    def _insert_claim(self, new: NewNegotiation) -> Any:
        return (
            self._insert(NegotiationRow)
            .values(
                id=new.id,
                tenant=new.tenant,
                identity=new.identity,
                direction=new.direction,
                counterparty=new.counterparty,
                intent=new.intent,
                origin_key=new.origin_key,
                task_id=new.task_id,
                context_id=new.context_id,
                state=OPENING,
                turns=0,
                binding=True,
                guidance=[],
                objective=new.objective,
                detail=dict(new.detail),
                version=1,
            )
            .on_conflict_do_nothing()
            .returning(NegotiationRow.id)
        )

    async def claim(self, new: NewNegotiation) -> Claim:
        """One insert against both unique keys; no row back means the same claim made
        earlier (``origin_key``) or a binding rival, read in the same transaction."""
        async with self._db.transaction() as s:
            if (await s.execute(self._insert_claim(new))).first() is not None:
                row = await s.get(NegotiationRow, new.id)
                assert row is not None
                return Claim(_negotiation(row), created=True)
            same = (
                await s.execute(
                    select(NegotiationRow).where(
                        NegotiationRow.tenant == new.tenant,
                        NegotiationRow.origin_key == new.origin_key,
                    )
                )
            ).scalar_one_or_none()
            if same is not None:
                return Claim(_negotiation(same), created=False)
            rival = (
                await s.execute(
                    select(NegotiationRow).where(
                        NegotiationRow.tenant == new.tenant,
                        NegotiationRow.identity == new.identity,
                        NegotiationRow.counterparty == new.counterparty,
                        NegotiationRow.intent == new.intent,
                        NegotiationRow.binding.is_(True),
                    )
                )
            ).scalar_one_or_none()
        if rival is None:
            # The rival ended between the insert and the read: claim again.
            return await self.claim(new)
        return Claim(_negotiation(rival), created=False, rival=True)

    async def get(self, tenant: str, negotiation_id: str) -> Negotiation | None:
        async with self._db.transaction() as s:
            row = await s.get(NegotiationRow, negotiation_id)
            return _negotiation(row) if row is not None and row.tenant == tenant else None

    async def by_task(self, tenant: str, identity: str, task_id: str) -> Negotiation | None:
        query = select(NegotiationRow).where(
            NegotiationRow.tenant == tenant,
            NegotiationRow.identity == identity,
            NegotiationRow.task_id == task_id,
        )
        async with self._db.transaction() as s:
            row = (await s.execute(query)).scalars().first()
            return _negotiation(row) if row is not None else None

    async def list_for(self, tenant: str, identity: str | None = None) -> list[Negotiation]:
        query = select(NegotiationRow).where(NegotiationRow.tenant == tenant)
        if identity is not None:
            query = query.where(NegotiationRow.identity == identity)
        query = query.order_by(NegotiationRow.updated_at, NegotiationRow.created_at)
        async with self._db.transaction() as s:
            return [_negotiation(r) for r in (await s.execute(query)).scalars().all()]

    async def change(
        self,
        tenant: str,
        negotiation_id: str,
        version: int,
        change: Change,
        turns: Sequence[TurnRecord] = (),
    ) -> Negotiation | None:
        statement = (
            update(NegotiationRow)
            .where(
                NegotiationRow.tenant == tenant,
                NegotiationRow.id == negotiation_id,
                NegotiationRow.version == version,
                NegotiationRow.state != ENDED,
            )
            .values(**_values(change), version=version + 1, updated_at=func.now())
            .returning(NegotiationRow.id)
        )
        async with self._db.transaction() as s:
            if (await s.execute(statement)).first() is None:
                return None
            if turns:
                last = (
                    await s.execute(
                        select(func.max(NegotiationTurnRow.seq)).where(
                            NegotiationTurnRow.negotiation_id == negotiation_id
                        )
                    )
                ).scalar()
                for offset, turn in enumerate(turns, start=1):
                    s.add(
                        NegotiationTurnRow(
                            tenant=tenant,
                            negotiation_id=negotiation_id,
                            seq=(last or 0) + offset,
                            way=turn.way,
                            message_id=turn.message_id,
                            reply_to=turn.reply_to,
                            message=dict(turn.message),
                        )
                    )
            await s.flush()
            s.expire_all()
            row = await s.get(NegotiationRow, negotiation_id)
            assert row is not None
            return _negotiation(row)

    async def turns(self, tenant: str, negotiation_id: str) -> list[TurnRecord]:
        query = (
            select(NegotiationTurnRow)
            .where(
                NegotiationTurnRow.tenant == tenant,
                NegotiationTurnRow.negotiation_id == negotiation_id,
            )
            .order_by(NegotiationTurnRow.seq)
        )
        async with self._db.transaction() as s:
            rows = (await s.execute(query)).scalars().all()
        return [TurnRecord(r.seq, r.way, r.message_id, dict(r.message), r.reply_to) for r in rows]

    async def drop(self, tenant: str, negotiation_id: str) -> bool:
        statement = (
            delete(NegotiationRow)
            .where(
                NegotiationRow.tenant == tenant,
                NegotiationRow.id == negotiation_id,
                NegotiationRow.state == OPENING,
                NegotiationRow.task_id.is_(None),
            )
            .returning(NegotiationRow.id)
        )
        async with self._db.transaction() as s:
            gone = (await s.execute(statement)).first() is not None
            if gone:
                await s.execute(
                    delete(NegotiationTurnRow).where(
                        NegotiationTurnRow.negotiation_id == negotiation_id
                    )
                )
            return gone
