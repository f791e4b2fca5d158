"""Bearer admin tokens on the admin app (issue 52): 401 for a missing, unknown, revoked or
expired token, 403 for a missing scope, and neither says which tokens exist; the OpenAPI
document and the docs are readable without a token."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.admin.tokens import AdminTokens
from app.testing.edge import demo_manifest
from tests.admin.conftest import AdminRig

_CREATE = {"id": "acme", "manifest": demo_manifest()}


async def _refusal(admin: AdminRig, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    response = await admin.client.post("/v1/tenants", json=_CREATE, headers=headers)
    assert response.headers["content-type"] == "application/problem+json"
    return response.status_code, response.json()


async def test_a_revoked_token_is_401_like_an_unknown_one(admin: AdminRig) -> None:
    token = await admin.token("tenants:write", name="ci")
    await admin.tokens.revoke("ci")
    revoked = await admin.client.post(
        "/v1/tenants", json=_CREATE, headers={"Authorization": f"Bearer {token}"}
    )
    unknown = await admin.client.post(
        "/v1/tenants", json=_CREATE, headers={"Authorization": "Bearer leadm_nobody"}
    )
    assert revoked.status_code == unknown.status_code == 401
    assert revoked.json() == unknown.json()
    assert revoked.headers["www-authenticate"].startswith("Bearer")
    assert "ci" not in revoked.text
    listed = await admin.client.get("/v1/tenants", headers=await admin.headers())
    assert listed.json()["items"] == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer "},
        {"Authorization": "Bearer " + "x" * 5000},
    ],
)
async def test_a_missing_or_malformed_token_is_401(
    admin: AdminRig, headers: dict[str, str]
) -> None:
    status, doc = await _refusal(admin, headers)
    assert status == 401 and doc["reason"] == "unauthorized"


async def test_an_expired_token_is_401(admin: AdminRig) -> None:
    past = AdminTokens(
        admin.edge.services.db.storage.admin_tokens,
        clock=lambda: datetime.now(UTC) - timedelta(days=2),
    )
    issued = await past.create("old", ["tenants:write"], expires_in_days=1)
    status, _ = await _refusal(admin, {"Authorization": f"Bearer {issued.token}"})
    assert status == 401


async def test_create_without_tenants_write_is_403(admin: AdminRig) -> None:
    token = await admin.token("tenants:read", "push:write", name="reader")
    status, doc = await _refusal(admin, {"Authorization": f"Bearer {token}"})
    assert status == 403 and doc["reason"] == "forbidden"
    assert "tenants:write" in str(doc["detail"]) and "reader" not in str(doc)
    listed = await admin.client.get("/v1/tenants", headers={"Authorization": f"Bearer {token}"})
    assert listed.status_code == 200 and listed.json()["items"] == []


@pytest.mark.parametrize(
    ("method", "path", "scope"),
    [
        ("GET", "/v1/tenants", "tenants:read"),
        ("GET", "/v1/tenants/acme/card", "tenants:read"),
        ("POST", "/v1/tenants/acme/disable", "tenants:write"),
        ("DELETE", "/v1/tenants/acme", "tenants:write"),
        ("GET", "/v1/push/dead-letters", "push:read"),
        ("POST", "/v1/push/dead-letters/1/replay", "push:write"),
    ],
)
async def test_every_route_needs_its_scope(
    admin: AdminRig, method: str, path: str, scope: str
) -> None:
    others = [s for s in ("tenants:read", "tenants:write", "push:read", "push:write") if s != scope]
    token = await admin.token(*others)
    refused = await admin.client.request(method, path, headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 403, refused.text
    anonymous = await admin.client.request(method, path)
    assert anonymous.status_code == 401


async def test_the_openapi_document_and_docs_need_no_token(admin: AdminRig) -> None:
    spec = await admin.client.get("/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    assert {"/v1/tenants", "/v1/tenants/{tenant_id}", "/v1/health"} <= set(paths)
    create = paths["/v1/tenants"]["post"]["requestBody"]["content"]["application/json"]
    assert "manifest" in create["schema"]["properties"]
    schemes = spec.json()["components"]["securitySchemes"].values()
    assert [s["scheme"] for s in schemes] == ["bearer"]
    docs = await admin.client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
