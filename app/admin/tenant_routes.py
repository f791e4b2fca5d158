"""``/v1/tenants``: the CLI's tenant operations over HTTP, through the same service
(``app.tenants.service``). Updates are optimistic: ``If-Match`` carries the revision the caller
last saw (the ETag of ``GET``), a stale one is 412 (RFC 9110 §13.1.1)."""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.admin.auth import require
from app.admin.bodies import json_body, openapi_body
from app.admin.context import AdminContext, admin_context
from app.admin.problems import Problem
from app.admin.schemas import TenantCreate, TenantUpdate
from app.admin.tokens import TENANTS_READ, TENANTS_WRITE, AdminTokenRecord
from app.card_manifest import published_manifest
from app.tenants.registry import TenantRecord
from app.tenants.service import (
    TenantExists,
    TenantInvalid,
    TenantMissing,
    TenantStale,
    tenant_json,
)

log = logging.getLogger("looping.edge.admin")

_ETAG = re.compile(r'"([0-9]{1,18})"')
MAX_PAGE = 500


def etag(record: TenantRecord) -> str:
    return f'"{record.revision}"'


def _shown(record: TenantRecord, status: int = 200) -> Response:
    return JSONResponse(tenant_json(record), status_code=status, headers={"ETag": etag(record)})


def if_match(value: str | None, *, required: bool) -> int | None:
    """The revision ``If-Match`` names (``None``: any, ``*`` or absent where allowed)."""
    if value is None:
        if required:
            raise Problem(
                428,
                "send If-Match with the tenant's ETag (its revision, quoted)",
                reason="precondition_required",
            )
        return None
    if value.strip() == "*":
        return None
    found = _ETAG.fullmatch(value.strip())
    if found is None:
        # A weak or malformed tag never matches (RFC 9110 §13.1.1: strong comparison).
        raise Problem(412, "If-Match does not match the tenant's ETag", reason="stale_revision")
    return int(found.group(1))


def _problem(exc: Exception) -> Problem:
    if isinstance(exc, TenantInvalid):
        return Problem(400, exc.message, reason=exc.reason)
    if isinstance(exc, TenantExists):
        return Problem(409, "a tenant with this id exists", reason="tenant_exists")
    if isinstance(exc, TenantStale):
        return Problem(
            412,
            f"the tenant is at revision {exc.current}: read it again and retry",
            reason="stale_revision",
        )
    return Problem(404, "no such tenant", reason="no_tenant")


_REFUSED = (TenantInvalid, TenantExists, TenantMissing, TenantStale)


def _written(caller: AdminTokenRecord, action: str, tenant: str) -> None:
    log.info("admin write", extra={"admin_token": caller.name, "action": action, "tenant": tenant})


router = APIRouter(prefix="/v1/tenants", tags=["tenants"])
_READ = require(TENANTS_READ)
_WRITE = require(TENANTS_WRITE)
_CONTEXT = Depends(admin_context)


@router.get("", summary="list tenants (paged, in id order)")
async def list_tenants(
    caller: AdminTokenRecord = _READ,
    admin: AdminContext = _CONTEXT,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    after: Annotated[str | None, Query(max_length=63)] = None,
) -> dict[str, Any]:
    page = await admin.tenants.page(after=after, limit=limit)
    return {"items": [tenant_json(r) for r in page.items], "next": page.next}


@router.post(
    "", summary="register a tenant", status_code=201, openapi_extra=openapi_body(TenantCreate)
)
async def create_tenant(
    request: Request, caller: AdminTokenRecord = _WRITE, admin: AdminContext = _CONTEXT
) -> Response:
    body = await json_body(request, TenantCreate)
    try:
        record = await admin.tenants.add(body.id, body.draft())
    except _REFUSED as exc:
        raise _problem(exc) from None
    _written(caller, "tenants.create", record.id)
    response = _shown(record, 201)
    response.headers["Location"] = f"/v1/tenants/{record.id}"
    return response


@router.get("/{tenant_id}", summary="one tenant; its ETag is its revision")
async def show_tenant(
    tenant_id: str, caller: AdminTokenRecord = _READ, admin: AdminContext = _CONTEXT
) -> Response:
    try:
        return _shown(await admin.tenants.get(tenant_id))
    except TenantMissing as exc:
        raise _problem(exc) from None


@router.patch(
    "/{tenant_id}",
    summary="change a tenant (If-Match: its ETag)",
    openapi_extra=openapi_body(TenantUpdate),
)
async def update_tenant(
    tenant_id: str,
    request: Request,
    caller: AdminTokenRecord = _WRITE,
    admin: AdminContext = _CONTEXT,
    if_match_header: Annotated[str | None, Header(alias="If-Match")] = None,
) -> Response:
    revision = if_match(if_match_header, required=True)
    body = await json_body(request, TenantUpdate)
    try:
        record = await admin.tenants.update(tenant_id, body.draft(), revision=revision)
    except _REFUSED as exc:
        raise _problem(exc) from None
    _written(caller, "tenants.update", record.id)
    return _shown(record)


async def _set_enabled(
    admin: AdminContext, tenant_id: str, enabled: bool, caller: AdminTokenRecord, header: str | None
) -> Response:
    revision = if_match(header, required=False)
    try:
        record = await admin.tenants.set_enabled(tenant_id, enabled, revision=revision)
    except _REFUSED as exc:
        raise _problem(exc) from None
    _written(caller, "tenants.enable" if enabled else "tenants.disable", record.id)
    return _shown(record)


@router.post("/{tenant_id}/enable", summary="serve a disabled tenant again")
async def enable_tenant(
    tenant_id: str,
    caller: AdminTokenRecord = _WRITE,
    admin: AdminContext = _CONTEXT,
    if_match_header: Annotated[str | None, Header(alias="If-Match")] = None,
) -> Response:
    return await _set_enabled(admin, tenant_id, True, caller, if_match_header)


@router.post("/{tenant_id}/disable", summary="stop serving a tenant (kept registered)")
async def disable_tenant(
    tenant_id: str,
    caller: AdminTokenRecord = _WRITE,
    admin: AdminContext = _CONTEXT,
    if_match_header: Annotated[str | None, Header(alias="If-Match")] = None,
) -> Response:
    return await _set_enabled(admin, tenant_id, False, caller, if_match_header)


@router.delete("/{tenant_id}", summary="remove a tenant", status_code=204)
async def delete_tenant(
    tenant_id: str,
    caller: AdminTokenRecord = _WRITE,
    admin: AdminContext = _CONTEXT,
    if_match_header: Annotated[str | None, Header(alias="If-Match")] = None,
) -> Response:
    revision = if_match(if_match_header, required=False)
    try:
        await admin.tenants.remove(tenant_id, revision=revision)
    except (TenantMissing, TenantStale) as exc:
        raise _problem(exc) from None
    _written(caller, "tenants.delete", tenant_id)
    return Response(status_code=204)


@router.get("/{tenant_id}/card", summary="the tenant's signed card, as the gateway gets it")
async def preview_card(
    tenant_id: str, caller: AdminTokenRecord = _READ, admin: AdminContext = _CONTEXT
) -> Response:
    try:
        record = await admin.tenants.get(tenant_id)
    except TenantMissing as exc:
        raise _problem(exc) from None
    try:
        document = admin.cards.tenant_document(
            record.id, published_manifest(record), record.card_version
        )
    except ValueError:
        raise Problem(
            409, "the stored manifest does not make a valid card", reason="invalid_card"
        ) from None
    return Response(document.body, media_type="application/json", headers={"ETag": document.etag})
