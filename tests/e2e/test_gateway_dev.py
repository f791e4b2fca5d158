"""``looping-edge gateway-dev send`` against a running ``looping-edge serve`` (processes)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from app.db.engine import Database
from app.security.keys import generate_private_jwk
from app.tenants.registry import TenantRecord, TenantStore
from app.testing.edge import demo_manifest
from tests.e2e.processes import CLI, Process, edge_env, free_port, process, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


async def _gateway_dev(
    edge_port: int, gw_port: int, state: Path, *args: str
) -> tuple[int, str, str]:
    argv = [
        CLI,
        "gateway-dev",
        "send",
        "--edge",
        f"http://127.0.0.1:{edge_port}",
        "--port",
        str(gw_port),
        "--state-dir",
        str(state),
        "--timeout",
        "40",
        *args,
    ]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await proc.communicate()
    return int(proc.returncode or 0), out.decode(), err.decode()


def _edge(
    pg_url: str, tmp: Path, port: int, gw_port: int, jwk: dict[str, str], name: str
) -> AbstractContextManager[Process]:
    env = edge_env(pg_url, port=port, signing_jwk=jwk, origins=[f"http://127.0.0.1:{gw_port}"])
    return process(name, ["serve", "--port", str(port)], env, tmp)


async def test_gateway_dev_round_trip_pins_and_refuses_a_changed_key(
    pg_url: str, tmp_path: Path
) -> None:
    db = Database(pg_url)
    try:
        await TenantStore(db).add(
            TenantRecord(id="demo", manifest=demo_manifest(), agent_kind="scripted")
        )
    finally:
        await db.dispose()
    port, gw_port, state = free_port(), free_port(), tmp_path / "gw"
    with _edge(pg_url, tmp_path, port, gw_port, generate_private_jwk("dev-edge-1"), "e1") as edge:
        await wait_ready(f"http://127.0.0.1:{port}", edge)
        code, out, err = await _gateway_dev(
            port, gw_port, state, "--tenant", "demo", "progress thinking\nreply hello back"
        )
        assert code == 0, out + err
        assert "card signature verified (kid dev-edge-1, pinned on first use)" in out
        assert "tenant 'demo': extended card verified" in out
        assert "[working] thinking" in out and "[completed] hello back" in out
        pins = json.loads((state / "pins.json").read_text())
        assert pins[f"http://127.0.0.1:{port}"]["kid"] == "dev-edge-1"

        code, out, err = await _gateway_dev(port, gw_port, state, "--tenant", "demo", "fail nope")
        assert code == 1 and "matches the pin" in out and "[failed] nope" in out

        code, out, err = await _gateway_dev(port, gw_port, state, "--tenant", "ghost", "hi")
        assert code == 4 and "unknown tenant" in err
        edge.check_alive()
    # The same edge origin now signs with another key: a re-registration, refused.
    with _edge(pg_url, tmp_path, port, gw_port, generate_private_jwk("dev-edge-2"), "e2") as edge:
        await wait_ready(f"http://127.0.0.1:{port}", edge)
        code, out, err = await _gateway_dev(port, gw_port, state, "--tenant", "demo", "hi")
        assert code == 4
        assert "dev-edge-2" in err and "dev-edge-1" in err and "pins.json" in err


async def test_gateway_dev_tells_when_the_edge_does_not_trust_it(
    pg_url: str, tmp_path: Path
) -> None:
    port, gw_port = free_port(), free_port()
    env = edge_env(
        pg_url, port=port, signing_jwk=generate_private_jwk("e"), origins=["https://gw.test"]
    )
    with process("serve", ["serve", "--port", str(port)], env, tmp_path) as edge:
        await wait_ready(f"http://127.0.0.1:{port}", edge)
        code, _, err = await _gateway_dev(port, gw_port, tmp_path / "gw", "--tenant", "demo", "hi")
        assert code == 4
        assert "HTTP 401" in err and f"GATEWAY_ORIGINS=http://127.0.0.1:{gw_port}" in err
