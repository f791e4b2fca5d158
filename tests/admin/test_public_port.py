"""Nothing of the admin API answers on the public port (issue 52): every admin path and method
is a 404 there, with a valid admin token too."""

from __future__ import annotations

import re

from tests.admin.conftest import AdminRig


def _admin_requests(admin: AdminRig) -> list[tuple[str, str]]:
    """Every operation of the admin API's OpenAPI document, and the document and docs."""
    found = [("GET", "/openapi.json"), ("GET", "/docs")]
    for template, operations in admin.app.openapi()["paths"].items():
        path = re.sub(r"\{[^}]+\}", "1", template)
        found += [(method.upper(), path) for method in operations]
    return found


async def test_every_admin_path_is_404_on_the_public_app(admin: AdminRig) -> None:
    requests = _admin_requests(admin)
    paths = {p for _, p in requests}
    assert {"/openapi.json", "/docs", "/v1/tenants", "/v1/health"} <= paths
    headers = await admin.headers()
    for method, path in requests:
        on_admin = await admin.client.request(method, path, headers=headers)
        # The route exists there (a 404 there is about the object, not the path).
        assert on_admin.status_code != 404 or on_admin.json()["reason"] != "not_found"
        public = await admin.edge.client.request(method, path, headers=headers, json={})
        assert public.status_code == 404, (method, path, public.status_code)
