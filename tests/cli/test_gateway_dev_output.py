"""What ``looping-edge gateway-dev`` prints of a pushed task (no edge needed)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from app.cli.common import edge_command
from app.cli.gateway_dev import DATA_SHOWN, _answer_command, _artifact_lines, _message_text
from app.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
OURS = Path(sys.executable).parent / "looping-edge"


def _task(*artifact_parts: list[object]) -> dict[str, object]:
    return {
        "id": "t-1",
        "status": {"state": "TASK_STATE_COMPLETED", "message": {"parts": [{"text": "done"}]}},
        "artifacts": [
            {"artifactId": f"artifact-{n}", "parts": parts}
            for n, parts in enumerate(artifact_parts, start=1)
        ],
    }


def test_a_data_artifact_prints_as_compact_json() -> None:
    # Found by trying the quickstart: `artifact data {"n": 1}` printed an empty line.
    task = _task([{"text": "a note"}], [{"data": {"n": 1, "tags": ["x", "é"]}}])
    assert _artifact_lines(task) == [
        "  [artifact artifact-1] a note",
        '  [artifact artifact-2] {"n":1,"tags":["x","é"]}',
    ]
    assert _message_text(task) == "done"


def test_a_large_data_part_is_cut_and_mixed_parts_stay_apart() -> None:
    big = {"rows": list(range(1000))}
    mixed = [{"text": "rows:"}, {"data": big}, {"url": "https://x.test/f", "filename": "f.csv"}]
    (line,) = _artifact_lines(_task(mixed))
    shown = json.dumps(big, separators=(",", ":"))[: DATA_SHOWN - 1] + "…"
    assert line == f"  [artifact artifact-1] rows: {shown} <file f.csv>"
    assert _artifact_lines(_task([{"data": None}, "junk"])) == ["  [artifact artifact-1] null"]


def test_the_answer_hint_names_the_command_as_it_runs_from_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a checkout whose venv is not activated
    args = build_parser().parse_args(
        ["gateway-dev", "send", "--edge", "http://127.0.0.1:8181", "--tenant", "demo", "hi"]
    )
    words = shlex.split(_answer_command(args, "t-1"))
    assert words[0] == edge_command() == str(OURS.relative_to(ROOT))
    assert words[1:] == [
        "gateway-dev",
        "send",
        "--edge",
        "http://127.0.0.1:8181",
        "--tenant",
        "demo",
        "--task-id",
        "t-1",
        "<answer>",
    ]
