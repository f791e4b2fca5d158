"""``/v1/tenants`` on both backends: the CLI's operations over HTTP, optimistic updates,
problem documents naming the field, bounded bodies and refused unknown fields (issue 52)."""

from __future__ import annotations

import json
import logging

import pytest

from app.testing.edge import demo_manifest
from tests.admin.conftest import AdminRig


def _problem(response: object, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    assert response.headers["content-type"] == "application/problem+json"  # type: ignore[attr-defined]
    doc: dict[str, object] = response.json()  # type: ignore[attr-defined]
    assert doc["status"] == status and doc["type"] == "about:blank"
    return doc


async def test_the_tenant_lifecycle_over_http(admin: AdminRig) -> None:
    h = await admin.headers()
    created = await admin.client.post(
        "/v1/tenants",
        json={"id": "acme", "manifest": demo_manifest(), "agent": "echo", "profile": "open"},
        headers=h,
    )
    assert created.status_code == 201, created.text
    assert created.headers["etag"] == '"1"' and created.headers["location"] == "/v1/tenants/acme"
    body = created.json()
    assert (body["profile"], body["requirePushConfig"], body["revision"]) == ("open", False, 1)

    renamed = {"manifest": demo_manifest("Renamed")}
    stale_free = await admin.client.patch(
        "/v1/tenants/acme", json=renamed, headers={**h, "If-Match": '"1"'}
    )
    assert stale_free.status_code == 200 and stale_free.headers["etag"] == '"2"'
    stale = await admin.client.patch(
        "/v1/tenants/acme", json={"agent": "scripted"}, headers={**h, "If-Match": '"1"'}
    )
    assert "revision 2" in str(_problem(stale, 412)["detail"])
    _problem(await admin.client.patch("/v1/tenants/acme", json=renamed, headers=h), 428)

    shown = await admin.client.get("/v1/tenants/acme", headers=h)
    assert shown.json()["manifest"]["name"] == "Renamed" and shown.headers["etag"] == '"2"'
    disabled = await admin.client.post("/v1/tenants/acme/disable", headers=h)
    assert disabled.json()["enabled"] is False
    enabled = await admin.client.post("/v1/tenants/acme/enable", headers={**h, "If-Match": '"3"'})
    assert enabled.json()["enabled"] is True and enabled.headers["etag"] == '"4"'
    stale_delete = await admin.client.delete("/v1/tenants/acme", headers={**h, "If-Match": '"3"'})
    _problem(stale_delete, 412)
    deleted = await admin.client.delete("/v1/tenants/acme", headers={**h, "If-Match": '"4"'})
    assert deleted.status_code == 204
    _problem(await admin.client.get("/v1/tenants/acme", headers=h), 404)
    _problem(await admin.client.delete("/v1/tenants/acme", headers=h), 404)


async def test_tenants_are_listed_in_pages(admin: AdminRig) -> None:
    h = await admin.headers()
    for name in ("c", "a", "b"):
        body = {"id": name, "manifest": demo_manifest()}
        assert (await admin.client.post("/v1/tenants", json=body, headers=h)).status_code == 201
    first = (await admin.client.get("/v1/tenants?limit=2", headers=h)).json()
    assert [t["id"] for t in first["items"]] == ["a", "b"] and first["next"] == "b"
    rest = (await admin.client.get("/v1/tenants?limit=2&after=b", headers=h)).json()
    assert [t["id"] for t in rest["items"]] == ["c"] and rest["next"] is None
    _problem(await admin.client.get("/v1/tenants?limit=0", headers=h), 400)


async def test_the_card_preview_is_the_signed_card_the_gateway_gets(admin: AdminRig) -> None:
    h = await admin.headers()
    body = {"id": "demo", "manifest": demo_manifest()}
    assert (await admin.client.post("/v1/tenants", json=body, headers=h)).status_code == 201
    preview = await admin.client.get("/v1/tenants/demo/card", headers=h)
    assert preview.status_code == 200
    served = await admin.edge.result("GetExtendedAgentCard", {})
    assert preview.json() == served and served["signatures"]


async def test_the_preview_carries_what_the_edge_adds_to_the_card(admin: AdminRig) -> None:
    """The ``defaultInputModes`` an attachment opt-in adds (and the ``negotiate`` skill) come
    from one function for both: the preview equals ``GetExtendedAgentCard``."""
    h = await admin.headers()
    config = {
        "model": {"base_url": "http://127.0.0.1:9/v1", "name": "m"},
        "system_prompt": "You help.",
        "attachments": {"images": True},
    }
    body = {"id": "pics", "manifest": demo_manifest(), "agent": "llm", "agent_config": config}
    assert (await admin.client.post("/v1/tenants", json=body, headers=h)).status_code == 201
    preview = (await admin.client.get("/v1/tenants/pics/card", headers=h)).json()
    assert "image/png" in preview["defaultInputModes"]
    served = await admin.edge.result("GetExtendedAgentCard", {}, tenant="pics")
    assert preview == served


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"id": "x", "manifest": {"name": "x"}}, "invalid manifest: description"),
        ({"id": "x", "manifest": "text"}, "manifest must be a JSON object"),
        ({"id": "Bad", "manifest": demo_manifest()}, "tenant id must be"),
        ({"id": "x", "manifest": demo_manifest(), "agent": "nope"}, "agent must be one of"),
        ({"id": "x", "manifest": demo_manifest(), "agent": "python"}, '"entry"'),
        ({"id": "x", "manifest": demo_manifest(), "colour": "red"}, "colour: unknown field"),
        ({"manifest": demo_manifest()}, "id: Field required"),
        ({"id": "x", "manifest": demo_manifest(), "require_push_config": "yes"}, "require_push"),
    ],
)
async def test_a_bad_body_is_a_problem_naming_the_field(
    admin: AdminRig, body: dict[str, object], words: str
) -> None:
    h = await admin.headers()
    doc = _problem(await admin.client.post("/v1/tenants", json=body, headers=h), 400)
    assert words in str(doc["detail"])
    assert (await admin.client.get("/v1/tenants", headers=h)).json()["items"] == []


async def test_bodies_are_bounded_strict_json(admin: AdminRig) -> None:
    h = await admin.headers()
    huge = json.dumps({"id": "x", "manifest": {"name": "x" * 700_000}})
    doc = _problem(
        await admin.client.post(
            "/v1/tenants", content=huge, headers={**h, "Content-Type": "application/json"}
        ),
        413,
    )
    assert "x" * 20 not in json.dumps(doc)
    twice = '{"id": "a", "id": "b", "manifest": {}}'
    json_headers = {**h, "Content-Type": "application/json"}
    doc = _problem(await admin.client.post("/v1/tenants", content=twice, headers=json_headers), 400)
    assert "repeats the member 'id'" in str(doc["detail"])
    not_json = await admin.client.post("/v1/tenants", content="{", headers=json_headers)
    _problem(not_json, 400)
    text = await admin.client.post("/v1/tenants", content="{}", headers=h)
    _problem(text, 415)


async def test_each_write_is_logged_with_the_token_name_never_the_token(
    admin: AdminRig, caplog: pytest.LogCaptureFixture
) -> None:
    token = await admin.token("tenants:write", name="deployer")
    h = {"Authorization": f"Bearer {token}"}
    with caplog.at_level(logging.INFO, logger="looping.edge.admin"):
        body = {"id": "acme", "manifest": demo_manifest()}
        assert (await admin.client.post("/v1/tenants", json=body, headers=h)).status_code == 201
    writes = [r for r in caplog.records if r.getMessage() == "admin write"]
    assert [(r.admin_token, r.action, r.tenant) for r in writes] == [  # type: ignore[attr-defined]
        ("deployer", "tenants.create", "acme")
    ]
    assert token not in caplog.text
