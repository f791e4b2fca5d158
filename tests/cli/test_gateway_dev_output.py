"""What ``looping-edge gateway-dev`` prints of a pushed task (no edge needed)."""

from __future__ import annotations

import json

from app.cli.gateway_dev import DATA_SHOWN, _artifact_lines, _message_text


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
