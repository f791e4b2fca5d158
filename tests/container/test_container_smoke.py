"""The operators' container path, built and run for real (issue 6).

scripts/container-smoke builds the Dockerfile with podman FROM the Debian stand-in base,
runs the image's `migrate` and `serve` against this machine's PostgreSQL and checks /livez,
/readyz, the JWKS, the signed card, the HEALTHCHECK, the non-root user and a clean stop.
It installs podman when it can; exit 77 means podman cannot be had here (skip).

Cost: first run on a machine ~1.5 min (base image ~50 s, dependency layer ~30 s), later runs
~20 s while the base image and the dependency layer are cached.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.container.dockerfile import ROOT

pytestmark = [pytest.mark.container, pytest.mark.slow]

SKIP = 77
BUDGET_SECONDS = 1500  # generous: a cold build downloads every dependency wheel


@pytest.mark.timeout(BUDGET_SECONDS + 60)
def test_image_builds_migrates_and_serves() -> None:
    try:
        result = subprocess.run(
            [str(ROOT / "scripts" / "container-smoke")],
            capture_output=True,
            text=True,
            timeout=BUDGET_SECONDS,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"container smoke test took over {BUDGET_SECONDS} s:\n{exc.stderr!r}"[-4000:])
    log = result.stderr
    if result.returncode == SKIP:
        reason = next((line for line in log.splitlines() if "SKIP" in line), log.strip())
        pytest.skip(f"podman unavailable: {reason}")
    assert result.returncode == 0, f"exit {result.returncode}\n{log[-6000:]}"
    for milestone in (
        "migrate done",
        "HTTP checks passed",
        "card signature verifies",
        "non-root and HEALTHCHECK OK",
        "PASS: container smoke test",
    ):
        assert milestone in log, f"missing {milestone!r}\n{log[-6000:]}"
