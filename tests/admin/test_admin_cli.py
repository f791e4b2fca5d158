"""``looping-edge admin-tokens`` and ``looping-edge admin`` as an operator runs them, and
``EDGE_ADMIN_LISTEN`` refused when it is not host:port (issue 52)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from app.errors import ConfigError
from app.security.keys import generate_private_jwk
from app.settings import load_settings
from tests.child_env import CLI, child_env
from tests.e2e.processes import free_port

pytestmark = pytest.mark.slow


def _env(tmp_path: Path, **knobs: object) -> dict[str, str]:
    return child_env(
        f"sqlite+aiosqlite:///{tmp_path / 'edge.db'}",
        signing_jwk=generate_private_jwk("cli"),
        public_url="http://127.0.0.1:1",
        origins=["https://gateway.test"],
        **knobs,
    )


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=60)


def test_tokens_are_shown_once_listed_by_name_and_revoked(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _cli(env, "migrate").returncode == 0
    made = _cli(env, "admin-tokens", "create", "--name", "zeta", "--scope", "push:read")
    assert made.returncode == 0, made.stderr
    token = made.stdout.splitlines()[-1]
    assert token.startswith("leadm_") and len(token) > 40 and made.stdout.count(token) == 1
    two = ("--scope", "tenants:read", "--scope", "tenants:write", "--expires-in", "7")
    assert _cli(env, "admin-tokens", "create", "--name", "alpha", *two).returncode == 0
    again = _cli(env, "admin-tokens", "create", "--name", "alpha", "--scope", "push:read")
    assert again.returncode == 2 and "exists" in again.stderr
    bad = _cli(env, "admin-tokens", "create", "--name", "x", "--scope", "root")
    assert bad.returncode == 2
    lines = _cli(env, "admin-tokens", "list").stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["alpha", "zeta"]
    assert "tenants:read,tenants:write" in lines[0] and "expires never" not in lines[0]
    assert token not in "\n".join(lines)
    assert _cli(env, "admin-tokens", "revoke", "zeta").returncode == 0
    assert "\trevoked\t" in _cli(env, "admin-tokens", "list").stdout.splitlines()[1]
    missing = _cli(env, "admin-tokens", "revoke", "nobody")
    assert missing.returncode == 2 and "no admin token 'nobody'" in missing.stderr


def test_the_admin_command_needs_its_listener_and_serve_another_port(tmp_path: Path) -> None:
    alone = _cli(_env(tmp_path), "admin")
    assert alone.returncode == 78 and "EDGE_ADMIN_LISTEN" in alone.stderr
    same = _cli(_env(tmp_path, admin_listen="127.0.0.1:8089"), "serve", "--port", "8089")
    assert same.returncode == 78 and "EDGE_ADMIN_LISTEN" in same.stderr


def test_serve_ends_at_once_when_its_admin_address_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        env = _env(tmp_path, admin_listen=address)
        done = _cli(env, "serve", "--port", str(free_port()))
    assert done.returncode == 78, done.stderr
    assert done.stderr.splitlines() == [
        f"looping-edge: EDGE_ADMIN_LISTEN: cannot listen on {address} (Address already in use)"
    ]


@pytest.mark.parametrize("value", ["8081", "localhost", "127.0.0.1:0", "a b:1", "h:99999"])
def test_a_listen_address_that_is_not_host_port_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="EDGE_ADMIN_LISTEN"):
        load_settings(admin_listen=value)
