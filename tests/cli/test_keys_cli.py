"""``looping-keys``: in-process via ``main(argv)`` and as the installed console script."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.keys import main
from app.security.keys import SigningKey, default_kid

SCRIPT = Path(sys.executable).parent / "looping-keys"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("A2A_SIGNING_KEY", raising=False)
    monkeypatch.delenv("A2A_SIGNING_KEY_FILE", raising=False)


def test_generate_prints_one_private_jwk_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys)
    assert code == 0
    assert err == ""
    assert out.count("\n") == 1
    jwk = json.loads(out)
    assert jwk["kid"] == default_kid()
    assert set(jwk) == {"kty", "crv", "kid", "x", "d"}
    assert SigningKey.from_jwk_json(out).public_jwk["x"] == jwk["x"]


def test_generate_with_kid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--kid", "edge-2030")
    assert code == 0
    assert json.loads(out)["kid"] == "edge-2030"


def test_generate_env_line_is_a_valid_shell_assignment(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--env", "--kid", "k1")
    assert code == 0
    assert re.fullmatch(r"A2A_SIGNING_KEY='[^'\n]+'\n", out)
    name, value = shlex.split(out)[0].split("=", 1)
    assert name == "A2A_SIGNING_KEY"
    assert SigningKey.from_jwk_json(value).kid == "k1"


def test_generate_out_writes_a_0600_file_and_prints_nothing_secret(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "edge.jwk"
    code, out, _ = _run(capsys, "--out", str(target), "--kid", "k2")
    assert code == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    jwk = json.loads(target.read_text())
    assert jwk["d"] not in out
    assert "k2" in out
    assert SigningKey.from_jwk_json(target.read_text()).kid == "k2"


def test_generate_out_never_overwrites(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "edge.jwk"
    target.write_text("keep me")
    code, out, err = _run(capsys, "--out", str(target))
    assert code == 2
    assert out == ""
    assert "already exists" in err
    assert target.read_text() == "keep me"


def test_public_from_key_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "edge.jwk"
    assert main(["--out", str(target), "--kid", "k3"]) == 0
    capsys.readouterr()
    code, out, _ = _run(capsys, "--public", "--key-file", str(target))
    assert code == 0
    jwks = json.loads(out)
    private = json.loads(target.read_text())
    assert jwks == {
        "keys": [
            {
                "kty": "OKP",
                "crv": "Ed25519",
                "x": private["x"],
                "kid": "k3",
                "use": "sig",
                "alg": "EdDSA",
            }
        ]
    }
    assert private["d"] not in out


def test_public_from_env(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["--kid", "from-env"]) == 0
    private = capsys.readouterr().out
    monkeypatch.setenv("A2A_SIGNING_KEY", private)
    code, out, _ = _run(capsys, "--public")
    assert code == 0
    assert json.loads(out)["keys"][0]["kid"] == "from-env"
    assert '"d"' not in out


def test_public_from_env_key_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = tmp_path / "k.jwk"
    assert main(["--out", str(target), "--kid", "via-file"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("A2A_SIGNING_KEY_FILE", str(target))
    code, out, _ = _run(capsys, "--public")
    assert code == 0
    assert json.loads(out)["keys"][0]["kid"] == "via-file"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--kid", "bad kid"], "--kid"),
        (["--kid", ""], "--kid"),
        (["--kid", "it's"], "--kid"),
        (["--env", "--out", "x.jwk"], "exclusive"),
        (["--key-file", "x.jwk"], "--public"),
        (["--public", "--kid", "k"], "--public"),
        (["--public", "--env"], "--public"),
        (["--public"], "no key"),
        (["--public", "--key-file", "/nonexistent/edge.jwk"], "cannot read"),
        (["--bogus"], "unrecognized"),
        (["--kid"], "expected one argument"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("looping-keys: error: ")
    assert fragment in err


def test_public_with_a_bad_key_names_its_source_and_hides_the_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = '{"kty":"OKP","crv":"Ed25519","x":"AAAA","d":"SECRETSECRET"}'
    target = tmp_path / "bad.jwk"
    target.write_text(bad)
    code, out, err = _run(capsys, "--public", "--key-file", str(target))
    assert code == 2
    assert out == ""
    # The file it read, not a variable that was never set.
    assert f"key file {target}: " in err and "A2A_SIGNING_KEY" not in err
    assert "kid" in err
    assert "SECRETSECRET" not in err
    monkeypatch.setenv("A2A_SIGNING_KEY", bad)
    code, _, err = _run(capsys, "--public")
    assert code == 2 and "A2A_SIGNING_KEY: " in err and "SECRETSECRET" not in err


def test_console_script_round_trip(tmp_path: Path) -> None:
    assert SCRIPT.exists(), "run `pip install -e .` so the console script exists"
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_SIGNING_KEY")}
    generated = subprocess.run(
        [str(SCRIPT), "--kid", "script-key"], capture_output=True, text=True, env=env, check=False
    )
    assert generated.returncode == 0
    env["A2A_SIGNING_KEY"] = generated.stdout.strip()
    public = subprocess.run(
        [str(SCRIPT), "--public"], capture_output=True, text=True, env=env, check=False
    )
    assert public.returncode == 0
    assert json.loads(public.stdout)["keys"][0]["kid"] == "script-key"
    bad = subprocess.run(
        [str(SCRIPT), "--kid", "no spaces"], capture_output=True, text=True, env=env, check=False
    )
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.count("\n") == 1
