"""`looping-edge migrate | tenants … | serve` as an operator runs them (subprocesses)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.security.keys import generate_private_jwk
from app.testing.edge import demo_manifest
from tests.polling import poll_until

BIN = Path(sys.executable).parent


def _env(db: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EDGE_", "A2A_"))}
    env.update(
        A2A_SIGNING_KEY=json.dumps(generate_private_jwk("cli-key")),
        GATEWAY_ORIGINS='["https://gateway.test"]',
        PUBLIC_URL="http://127.0.0.1:1",
        DATABASE_URL=f"sqlite+aiosqlite:///{db}",
        EDGE_LOG_JSON="false",
    )
    env.update(extra)
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "looping-edge"), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def operator(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    env = _env(tmp_path / "edge.db")
    done = _cli(env, "migrate")
    assert done.returncode == 0, done.stderr
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(demo_manifest()))
    yield env, manifest


@pytest.mark.slow
def test_tenant_lifecycle(operator: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, manifest = operator
    assert "no tenants" in _cli(env, "tenants", "list").stdout
    added = _cli(env, "tenants", "add", "demo", "--manifest", str(manifest), "--agent", "echo")
    assert added.returncode == 0, added.stderr
    again = _cli(env, "tenants", "add", "demo", "--manifest", str(manifest))
    assert again.returncode == 2 and "already exists" in again.stderr

    listed = json.loads(_cli(env, "tenants", "list", "--json").stdout)
    assert [t["id"] for t in listed] == ["demo"] and listed[0]["revision"] == 1

    renamed = tmp_path / "m2.json"
    renamed.write_text(json.dumps(demo_manifest("Renamed")))
    assert _cli(env, "tenants", "update", "demo", "--manifest", str(renamed)).returncode == 0
    shown = json.loads(_cli(env, "tenants", "show", "demo").stdout)
    assert shown["manifest"]["name"] == "Renamed" and shown["revision"] == 2

    assert _cli(env, "tenants", "disable", "demo").returncode == 0
    assert json.loads(_cli(env, "tenants", "show", "demo").stdout)["enabled"] is False
    assert _cli(env, "tenants", "enable", "demo").returncode == 0
    assert _cli(env, "tenants", "remove", "demo").returncode == 0
    missing = _cli(env, "tenants", "show", "demo")
    assert missing.returncode == 2 and "no tenant 'demo'" in missing.stderr


@pytest.mark.slow
@pytest.mark.parametrize("bad_id", ["Demo", "-demo", "a" * 64, "de mo", ""])
def test_invalid_tenant_ids_are_refused(operator: tuple[dict[str, str], Path], bad_id: str) -> None:
    env, manifest = operator
    done = _cli(env, "tenants", "add", bad_id, "--manifest", str(manifest))
    assert done.returncode == 2 and done.stderr.strip()


@pytest.mark.slow
@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", json.dumps({"name": "x"}), json.dumps({**demo_manifest(), "extra": 1})],
)
def test_invalid_manifests_are_refused(
    operator: tuple[dict[str, str], Path], tmp_path: Path, content: str
) -> None:
    env, _ = operator
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    done = _cli(env, "tenants", "add", "demo", "--manifest", str(bad))
    assert done.returncode == 2
    assert "invalid manifest" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_refuses_bad_config_with_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path / "edge.db", GATEWAY_ORIGINS="")
    done = _cli(env, "serve", "--port", "1")
    assert done.returncode == 78
    assert done.stderr.strip().count("\n") == 0
    assert "GATEWAY_ORIGINS" in done.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_serve_picks_up_tenant_changes_without_restart(
    operator: tuple[dict[str, str], Path],
) -> None:
    env, manifest = operator
    port = _free_port()
    env = {**env, "PUBLIC_URL": f"http://127.0.0.1:{port}", "EDGE_TENANT_REFRESH_SECONDS": "0.5"}
    proc = subprocess.Popen(
        [str(BIN / "looping-edge"), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"

    def live() -> bool:
        try:
            return httpx.get(f"{base}/livez", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def card_names_late() -> bool:
        return "late" in httpx.get(f"{base}/.well-known/agent-card.json").json()["description"]

    try:
        asyncio.run(poll_until(live, 20, interval=0.1, what="the edge started"))
        assert httpx.get(f"{base}/readyz").status_code == 200
        assert not card_names_late()
        assert _cli(env, "tenants", "add", "late", "--manifest", str(manifest)).returncode == 0
        asyncio.run(poll_until(card_names_late, 10, interval=0.2, what="the tenant change seen"))
    finally:
        proc.terminate()
        proc.wait(timeout=15)


# --- bad input: one line, a documented exit code, no traceback, no secret ------------------

SECRET = "s3cret-in-the-dsn"


def _one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and SECRET not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("command", [("tenants", "list"), ("migrate",), ("push", "dead")])
@pytest.mark.parametrize(
    "url",
    ["mysql://root:" + SECRET + "@localhost/db", "postgresql://x@localhost/db", "not a url"],
)
def test_a_database_url_of_the_wrong_shape_is_78_naming_it(
    tmp_path: Path, command: tuple[str, ...], url: str
) -> None:
    done = _cli(_env(tmp_path / "x.db", DATABASE_URL=url), *command)
    assert _one_line(done, 78).startswith("looping-edge: DATABASE_URL")


@pytest.mark.parametrize("command", [("tenants", "list"), ("migrate",), ("push", "dead")])
def test_an_unreachable_database_is_69_without_its_address_or_password(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    # Nothing listens on port 1: a real refused connection, not a mock.
    url = f"postgresql+asyncpg://postgres:{SECRET}@127.0.0.1:1/nowhere"
    line = _one_line(_cli(_env(tmp_path / "x.db", DATABASE_URL=url), *command), 69)
    assert "cannot use the database" in line and "127.0.0.1" not in line


def test_an_unmigrated_database_is_69_and_says_so(tmp_path: Path) -> None:
    done = _cli(_env(tmp_path / "empty.db"), "tenants", "list")
    assert "looping-edge migrate" in _one_line(done, 69)


@pytest.mark.slow
@pytest.mark.parametrize(
    "content",
    [
        b'{"api_token": "' + SECRET.encode() + b'", "x": NaN}',
        b'{"api_token": "' + SECRET.encode() + b'", "x": 1e999}',
        b'{"api_token": "' + SECRET.encode() + b'\\u0000"}',
        b"[" * 100_000 + b"]" * 100_000,
        b"\xff\xfe not utf-8",
        b'{"a": 1, "a": 2}',
    ],
)
def test_a_bad_agent_config_is_refused_without_echoing_it(
    operator: tuple[dict[str, str], Path], tmp_path: Path, content: bytes
) -> None:
    env, manifest = operator
    config = tmp_path / "agent.json"
    config.write_bytes(content)
    done = _cli(
        env, "tenants", "add", "sec", "--manifest", str(manifest), "--agent-config", str(config)
    )
    assert "agent config" in _one_line(done, 2)
    assert _cli(env, "tenants", "show", "sec").returncode == 2  # nothing half-written


@pytest.mark.slow
def test_a_python_agent_needs_an_entry(
    operator: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, manifest = operator
    add = ("tenants", "add", "py", "--manifest", str(manifest), "--agent", "python")
    assert "package.module:factory" in _one_line(_cli(env, *add), 2)
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"entry": "my_agents.greeter:build", "greeting": "hi"}))
    done = _cli(env, *add, "--agent-config", str(config))
    assert done.returncode == 0, done.stderr
    shown = json.loads(_cli(env, "tenants", "show", "py").stdout)
    assert (shown["agent"], shown["agentConfig"]["entry"]) == ("python", "my_agents.greeter:build")
    # Switching an echo tenant to python without an entry is refused too.
    assert _cli(env, "tenants", "add", "e", "--manifest", str(manifest)).returncode == 0
    switch = ("tenants", "update", "e", "--agent", "python")
    assert "entry" in _one_line(_cli(env, *switch), 2)


@pytest.mark.slow
def test_an_agent_config_past_its_cap_is_refused(
    operator: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    # Found by audit: a 30-MB config was stored, and every replica reloads it on each refresh.
    env, manifest = operator
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"blob": "x" * (256 * 1024)}))
    add = ("tenants", "add", "big", "--manifest", str(manifest), "--agent-config", str(config))
    assert "larger than 262144 bytes" in _one_line(_cli(env, *add), 2)
    assert _cli(env, "tenants", "add", "big", "--manifest", str(manifest)).returncode == 0
    update = ("tenants", "update", "big", "--agent-config", str(config))
    assert "larger than" in _one_line(_cli(env, *update), 2)


@pytest.mark.slow
def test_a_manifest_integer_past_a_double_is_one_line_not_a_traceback(
    operator: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    # Found by audit: 10**400 in extension params ended in an OverflowError traceback, exit 1.
    env, _ = operator
    manifest = tmp_path / "m.json"
    doc = {**demo_manifest(), "capabilities": {"extensions": [{"uri": "https://x.test/e"}]}}
    doc["capabilities"]["extensions"][0]["params"] = {"a": 10**400}
    manifest.write_text(json.dumps(doc))
    line = _one_line(_cli(env, "tenants", "add", "big", "--manifest", str(manifest)), 2)
    assert "out of range" in line and str(manifest) in line


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "-2", "65", "100000"])
def test_serve_refuses_a_worker_count_out_of_range(tmp_path: Path, workers: str) -> None:
    # 100000 once started processes until the host ran out of memory.
    done = _cli(_env(tmp_path / "x.db"), "serve", "--workers", workers)
    assert _one_line(done, 2) == "looping-edge: --workers must be between 1 and 64"


@pytest.mark.slow
def test_push_replay_refuses_an_id_no_row_can_have(operator: tuple[dict[str, str], Path]) -> None:
    env, _ = operator
    done = _cli(env, "push", "replay", "99999999999999999999999")
    assert "positive integers" in _one_line(done, 2)


def test_serve_refuses_a_port_out_of_range(tmp_path: Path) -> None:
    # 99999 once "ran" on another port than the one it logged.
    done = _cli(_env(tmp_path / "x.db"), "serve", "--port", "99999")
    assert _one_line(done, 2) == "looping-edge: --port must be between 0 and 65535"


def test_a_public_url_with_a_query_is_refused(tmp_path: Path) -> None:
    done = _cli(_env(tmp_path / "x.db", PUBLIC_URL="https://edge.example.com?x=1"), "serve")
    assert _one_line(done, 78).startswith("looping-edge: PUBLIC_URL: must be scheme://host")


def test_gateway_dev_refuses_to_overwrite_a_corrupt_endpoints_file(tmp_path: Path) -> None:
    # Treated as empty, the next registration replaced it: every stored token was lost.
    state = tmp_path / "gw"
    state.mkdir()
    (state / "endpoints.json").write_text("{corrupt")
    done = _cli(
        _env(tmp_path / "x.db"),
        "gateway-dev",
        "send",
        "--edge",
        "http://127.0.0.1:1",
        "--tenant",
        "demo",
        "--state-dir",
        str(state),
        "--port",
        "0",
        "hello",
    )
    assert "endpoints.json is unreadable" in _one_line(done, 4)
    assert (state / "endpoints.json").read_text() == "{corrupt"
