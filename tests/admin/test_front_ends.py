"""The CLI and the admin API are two front ends of one tenant service (issue 52): the same
definition gives the same tenant, the same bad manifest the same message naming the field,
on both backends."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.security.keys import generate_private_jwk
from app.tenants.service import TenantInvalid, check_manifest, tenant_json
from app.testing.edge import demo_manifest
from tests.admin.conftest import AdminRig
from tests.child_env import CLI, child_env

pytestmark = pytest.mark.slow


def _without(field: str) -> dict[str, Any]:
    manifest = demo_manifest()
    del manifest[field]
    return manifest


BAD_MANIFESTS = {
    "no description": _without("description"),
    "blank name": {**demo_manifest(), "name": "  "},
    "push off": {**demo_manifest(), "capabilities": {"pushNotifications": False}},
    "unknown field": {**demo_manifest(), "colour": "red"},
    "duplicate skills": {
        **demo_manifest(),
        "skills": demo_manifest()["skills"] * 2,
    },
}


async def _cli(db_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = child_env(
        db_url,
        signing_jwk=generate_private_jwk("cli"),
        public_url="http://127.0.0.1:1",
        origins=["https://gateway.test"],
    )
    return await asyncio.to_thread(
        subprocess.run,
        [CLI, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
    )


async def _add(
    front: str, admin: AdminRig, db_url: str, tmp_path: Path, manifest: dict[str, Any]
) -> tuple[bool, str]:
    """Register tenant ``t`` (agent scripted, profile open) through ``front``: (added, the
    message of a refusal)."""
    if front == "cli":
        path = tmp_path / "manifest.json"
        path.write_text(json.dumps(manifest))
        done = await _cli(
            db_url, tmp_path, "tenants", "add", "t", "--manifest", str(path),
            "--agent", "scripted", "--profile", "open",
        )  # fmt: skip
        return done.returncode == 0, done.stderr
    body = {"id": "t", "manifest": manifest, "agent": "scripted", "profile": "open"}
    response = await admin.client.post("/v1/tenants", json=body, headers=await admin.headers())
    if response.status_code == 201:
        return True, ""
    assert response.status_code == 400
    detail: str = response.json()["detail"]
    return False, detail


@pytest.mark.parametrize("front", ["cli", "api"])
@pytest.mark.parametrize("case", sorted(BAD_MANIFESTS))
async def test_a_bad_manifest_gets_the_same_message_from_both_front_ends(
    admin: AdminRig, db_url: str, tmp_path: Path, front: str, case: str
) -> None:
    manifest = BAD_MANIFESTS[case]
    with pytest.raises(TenantInvalid) as refused:
        check_manifest(manifest)
    message = refused.value.message
    assert message.startswith("invalid manifest: ")
    added, said = await _add(front, admin, db_url, tmp_path, manifest)
    assert not added
    if front == "api":
        assert said == message
    else:
        assert said.strip().endswith(f": {message}"), said
    assert await admin.edge.services.tenant_store.list() == []


@pytest.mark.parametrize("front", ["cli", "api"])
async def test_a_good_definition_gives_the_same_tenant_from_both_front_ends(
    admin: AdminRig, db_url: str, tmp_path: Path, front: str
) -> None:
    added, said = await _add(front, admin, db_url, tmp_path, demo_manifest())
    assert added, said
    (record,) = await admin.edge.services.tenant_store.list()
    shown = tenant_json(record)
    assert shown == {
        "id": "t",
        "enabled": True,
        "profile": "open",
        "agent": "scripted",
        "agentConfig": {},
        "requirePushConfig": False,
        "dedupeMessageIds": True,
        "revision": 1,
        "manifest": demo_manifest(),
    }
