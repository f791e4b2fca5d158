"""``/v1/push/dead-letters`` (list, replay) and ``/v1/health``: the operator's view of push
delivery and of the edge's queues, the same operations as ``looping-edge push dead|replay``
(``app.push.dead_letters``)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from starlette.requests import Request

from app.admin.auth import require
from app.admin.bodies import json_body, openapi_body
from app.admin.context import AdminContext, admin_context
from app.admin.problems import Problem
from app.admin.schemas import ReplayRequest
from app.admin.tokens import PUSH_READ, PUSH_WRITE, AdminTokenRecord
from app.ops.health import health_summary
from app.push.dead_letters import DeadLetterFilter, ReplayReport, list_dead, replay

log = logging.getLogger("looping.edge.admin")

MAX_PAGE = 1000
_MAX_ID = 2**63 - 1


def _report(report: ReplayReport) -> dict[str, list[int]]:
    return {
        "requeued": list(report.requeued),
        "superseded": list(report.superseded),
        "notDead": list(report.not_dead),
    }


router = APIRouter(prefix="/v1")
_CONTEXT = Depends(admin_context)


@router.get("/push/dead-letters", tags=["push"], summary="dead-lettered pushes (paged)")
async def dead_letters(
    caller: AdminTokenRecord = require(PUSH_READ),
    admin: AdminContext = _CONTEXT,
    tenant: Annotated[str | None, Query(max_length=63)] = None,
    task: Annotated[str | None, Query(max_length=64)] = None,
    kind: Annotated[str | None, Query(max_length=16)] = None,
    after: Annotated[int | None, Query(ge=0, le=_MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> dict[str, Any]:
    filters = DeadLetterFilter(task_id=task, kind=kind, after_id=after)
    letters = await list_dead(admin.db, tenant=tenant, limit=limit + 1, filters=filters)
    page = letters[:limit]
    more = len(letters) > limit
    return {"items": [d.as_json() for d in page], "next": page[-1].id if more else None}


@router.post(
    "/push/dead-letters/{letter_id}/replay", tags=["push"], summary="re-queue one dead letter"
)
async def replay_one(
    letter_id: int, caller: AdminTokenRecord = require(PUSH_WRITE), admin: AdminContext = _CONTEXT
) -> dict[str, list[int]]:
    if not 1 <= letter_id <= _MAX_ID:
        raise Problem(404, "no such dead letter", reason="no_dead_letter")
    report = await replay(admin.db, ids=[letter_id])
    if report.not_dead:
        raise Problem(404, "no such dead letter", reason="no_dead_letter")
    log.info("admin write", extra={"admin_token": caller.name, "action": "push.replay"})
    return _report(report)


@router.post(
    "/push/dead-letters/replay",
    tags=["push"],
    summary="re-queue dead letters: by ids, or all (of a tenant)",
    openapi_extra=openapi_body(ReplayRequest),
)
async def replay_many(
    request: Request, caller: AdminTokenRecord = require(PUSH_WRITE), admin: AdminContext = _CONTEXT
) -> dict[str, list[int]]:
    body = await json_body(request, ReplayRequest)
    if body.all == bool(body.ids):
        raise Problem(400, "give ids or all (not both)", reason="invalid_body")
    report = await replay(admin.db, ids=None if body.all else list(body.ids), tenant=body.tenant)
    log.info(
        "admin write",
        extra={"admin_token": caller.name, "action": "push.replay", "tenant": body.tenant},
    )
    return _report(report)


@router.get("/health", tags=["health"], summary="tenants, unfinished turns, push outbox")
async def health(
    caller: AdminTokenRecord = require(None), admin: AdminContext = _CONTEXT
) -> dict[str, Any]:
    return await health_summary(admin.db.storage)
