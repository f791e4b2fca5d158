"""``looping-edge gateway-dev send`` against a running ``looping-edge serve`` (processes)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
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


async def _add_scripted_demo(db: Database) -> None:
    await TenantStore(db).add(
        TenantRecord(id="demo", manifest=demo_manifest(), agent_kind="scripted")
    )


async def test_gateway_dev_round_trip_pins_and_refuses_a_changed_key(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    await _add_scripted_demo(pg_database)
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


async def test_the_answer_hint_runs_as_printed_and_a_new_state_dir_is_trusted(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    # Found by audit: the hint dropped --state-dir and --identity (run verbatim it was a 401),
    # and every state dir's key had the kid gateway-dev-1, so a second one on the same port
    # was checked against the first one's cached key until the edge's JWKS cache expired.
    await _add_scripted_demo(pg_database)
    port, gw_port = free_port(), free_port()
    env = edge_env(
        pg_url,
        port=port,
        signing_jwk=generate_private_jwk("dev-edge-1"),
        origins=[f"http://127.0.0.1:{gw_port}"],
        jwks_cooldown_seconds=1,
    )
    first, second = tmp_path / "gw-a", tmp_path / "gw-b"
    with process("serve", ["serve", "--port", str(port)], env, tmp_path) as edge:
        await wait_ready(f"http://127.0.0.1:{port}", edge)
        script = "ask what is your name?\nreply hello {answer}"
        code, out, err = await _gateway_dev(
            port, gw_port, first, "--identity", "alice", "--tenant", "demo", script
        )
        assert code == 0, out + err
        (hint,) = [line for line in out.splitlines() if "answer with:" in line]
        words = shlex.split(hint.split("answer with:", 1)[1])
        # the command as printed runs this installation from here (activated venv or not)
        assert os.path.samefile(shutil.which(words[0]) or words[0], CLI)
        assert words[1:3] == ["gateway-dev", "send"]
        assert ["--state-dir", str(first)] == words[words.index("--state-dir") :][:2]
        assert words[words.index("--identity") :][:2] == ["--identity", "alice"]
        answered = [*words[:-1], "Bob"]
        proc = await asyncio.create_subprocess_exec(
            *answered, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out_b, err_b = await proc.communicate()
        assert proc.returncode == 0, (out_b + err_b).decode()
        assert "[completed] hello Bob" in out_b.decode()

        await asyncio.sleep(1.2)  # the edge's unknown-kid cooldown, set to 1 s here
        code, out, err = await _gateway_dev(port, gw_port, second, "--tenant", "demo", "hi")
        assert code == 0, out + err
        kids = {json.loads((d / "gateway-key.json").read_text())["kid"] for d in (first, second)}
        assert len(kids) == 2 and all(k.startswith("gateway-dev-") for k in kids)
