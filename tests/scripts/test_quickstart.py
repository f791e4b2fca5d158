"""``scripts/quickstart`` run in a copy whose venv commands only record how they were called."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_RECORDER = """#!/usr/bin/env bash
echo "$(basename "$0") $* PUBLIC_URL=${PUBLIC_URL:-}" >> "$(dirname "$0")/calls.log"
"""


def _checkout(tmp_path: Path) -> Path:
    """The quickstart beside a bootstrap that does nothing and venv commands that record."""
    (tmp_path / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "quickstart", tmp_path / "scripts" / "quickstart")
    bootstrap = tmp_path / "scripts" / "bootstrap"
    bootstrap.write_text("#!/usr/bin/env bash\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("looping-edge", "looping-keys"):
        (bin_dir / name).write_text(_RECORDER)
    for path in [bootstrap, *bin_dir.iterdir()]:
        path.chmod(0o755)
    return tmp_path


def _quickstart(checkout: Path, **env: str) -> tuple[str, list[str]]:
    base = {k: v for k, v in os.environ.items() if k not in ("PORT", "PUBLIC_URL")}
    done = subprocess.run(
        [str(checkout / "scripts" / "quickstart")],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout, (checkout / ".venv" / "bin" / "calls.log").read_text().splitlines()


def test_another_port_signs_the_card_for_that_port(tmp_path: Path) -> None:
    # Found by trying the quickstart: PORT=8181 served on 8181 a card signed for 8080.
    out, calls = _quickstart(_checkout(tmp_path), PORT="8181")
    (serve,) = [c for c in calls if c.startswith("looping-edge serve")]
    assert "--port 8181" in serve and serve.endswith("PUBLIC_URL=http://127.0.0.1:8181")
    assert "8080" not in out and "--edge http://127.0.0.1:8181 " in out


def test_the_default_port_and_a_given_public_url_are_kept(tmp_path: Path) -> None:
    _, calls = _quickstart(_checkout(tmp_path / "a"))
    assert calls[-1] == "looping-edge serve --host 127.0.0.1 --port 8080 " + (
        "PUBLIC_URL=http://127.0.0.1:8080"
    )
    _, calls = _quickstart(_checkout(tmp_path / "b"), PORT="8181", PUBLIC_URL="https://edge.test")
    assert calls[-1].endswith("--port 8181 PUBLIC_URL=https://edge.test")
