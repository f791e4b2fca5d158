"""The operator's flow of issue 52 over real processes, on both backends: ``looping-edge serve``
with ``EDGE_ADMIN_LISTEN``, a token made with ``looping-edge admin-tokens create``, a tenant
registered over HTTP on the admin listener, and a gateway token for that tenant gets its
signed card from ``GetExtendedAgentCard`` within the registry's refresh interval. Scopes and
revocation hold on the real listener, and the public port knows no admin path."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.security.keys import generate_private_jwk
from app.testing.edge import demo_manifest
from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks
from tests.child_env import CLI
from tests.e2e.processes import Process, edge_env, free_port, process, until, wait_ready

pytestmark = pytest.mark.slow

REFRESH_SECONDS = 1.0
# What a loaded shared host may add to the refresh interval: one reload plus a request.
SLACK_SECONDS = 4.0


async def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [CLI, *args], env=env, capture_output=True, text=True, timeout=60
    )


async def _token(env: dict[str, str], name: str, *scopes: str) -> str:
    flags = [f for scope in scopes for f in ("--scope", scope)]
    done = await _cli(env, "admin-tokens", "create", "--name", name, *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


async def _admin_up(client: httpx.AsyncClient, admin: str, edge: Process) -> None:
    async def up() -> bool:
        try:
            return (await client.get(admin + "/openapi.json")).status_code == 200
        except httpx.HTTPError:
            return False

    await until(up, edge)


async def _card(client: httpx.AsyncClient, base: str, kit: GatewayKit) -> dict[str, Any] | None:
    headers = kit.bearer(audience=base + "/a2a", tenant="acme")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "GetExtendedAgentCard",
        "params": {"tenant": "acme"},
    }
    doc = (await client.post(base + "/a2a", json=body, headers=headers)).json()
    result: dict[str, Any] | None = doc.get("result")
    return result


@dataclass
class AdminEdge:
    """A ``looping-edge serve`` with its admin listener up, and a client for both ports."""

    kit: GatewayKit
    env: dict[str, str]
    base: str
    admin: str
    edge: Process
    client: httpx.AsyncClient


@asynccontextmanager
async def admin_edge(
    db_url: str, tmp_path: Path, *serve_flags: str, **knobs: object
) -> AsyncIterator[AdminEdge]:
    kit = GatewayKit()
    port, admin_port = free_port(), free_port()
    base, admin = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin_port}"
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(serve_jwks(kit))
        env = edge_env(
            db_url,
            port=port,
            signing_jwk=generate_private_jwk("e2e-edge"),
            origins=[kit.origin],
            admin_listen=f"127.0.0.1:{admin_port}",
            **knobs,
        )
        argv = ["serve", "--port", str(port), *serve_flags]
        edge = stack.enter_context(process("serve", argv, env, tmp_path))
        await wait_ready(base, edge, within=60)
        client = await stack.enter_async_context(httpx.AsyncClient(trust_env=False, timeout=30))
        await _admin_up(client, admin, edge)
        yield AdminEdge(kit, env, base, admin, edge, client)


async def test_an_operator_registers_a_tenant_over_the_admin_listener(
    db_url: str, tmp_path: Path
) -> None:
    async with admin_edge(db_url, tmp_path, tenant_refresh_seconds=REFRESH_SECONDS) as up:
        kit, env, base, admin = up.kit, up.env, up.base, up.admin
        edge, client = up.edge, up.client
        assert await _card(client, base, kit) is None  # no such tenant yet

        writer = await _token(env, "deployer", "tenants:read", "tenants:write")
        reader = await _token(env, "viewer", "tenants:read")
        body = {"id": "acme", "manifest": demo_manifest("Acme agent"), "agent": "echo"}
        refused = await client.post(
            admin + "/v1/tenants", json=body, headers={"Authorization": f"Bearer {reader}"}
        )
        assert refused.status_code == 403
        assert refused.headers["content-type"] == "application/problem+json"

        created = await client.post(
            admin + "/v1/tenants", json=body, headers={"Authorization": f"Bearer {writer}"}
        )
        registered_at = time.monotonic()
        assert created.status_code == 201, created.text

        async def served() -> dict[str, Any] | None:
            return await _card(client, base, kit)

        card = await until(served, edge, within=REFRESH_SECONDS + SLACK_SECONDS)
        assert time.monotonic() - registered_at <= REFRESH_SECONDS + SLACK_SECONDS
        assert card["name"] == "Acme agent" and card["signatures"]
        preview = await client.get(
            admin + "/v1/tenants/acme/card", headers={"Authorization": f"Bearer {reader}"}
        )
        assert preview.json() == card

        for path in ("/v1/tenants", "/v1/health", "/openapi.json", "/docs"):
            public = await client.get(base + path, headers={"Authorization": f"Bearer {writer}"})
            assert public.status_code == 404, path

        assert (await _cli(env, "admin-tokens", "revoke", "deployer")).returncode == 0
        revoked = await client.get(
            admin + "/v1/tenants", headers={"Authorization": f"Bearer {writer}"}
        )
        assert revoked.status_code == 401
        listed = await _cli(env, "admin-tokens", "list")
        assert [line.split("\t")[:2] for line in listed.stdout.splitlines()] == [
            ["deployer", "revoked"],
            ["viewer", "active"],
        ]
        assert writer not in edge.logs() and "deployer" in edge.logs()


def _admin_children(parent: int) -> list[int]:
    """The ``looping-edge admin`` processes whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"app.cli.main" in argv and b"admin" in argv:
            found.append(int(entry.name))
    return found


@pytest.mark.postgres
async def test_serve_with_several_workers_opens_the_admin_listener_once(
    pg_url: str, tmp_path: Path
) -> None:
    flags = ("--workers", "2", "--no-worker", "--no-push")
    async with admin_edge(pg_url, tmp_path, *flags) as up:
        env, admin, edge, client = up.env, up.admin, up.edge, up.client
        token = await _token(env, "ops", "tenants:read")
        listed = await client.get(
            admin + "/v1/tenants", headers={"Authorization": f"Bearer {token}"}
        )
        assert listed.status_code == 200 and listed.json() == {"items": [], "next": None}
        assert len(_admin_children(edge.proc.pid)) == 1
        edge.proc.terminate()
        assert edge.proc.wait(timeout=30) == 0
        with pytest.raises(httpx.ConnectError):  # the admin process ended with serve
            await client.get(admin + "/openapi.json")
