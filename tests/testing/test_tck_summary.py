"""The summary of a TCK run (app.testing.tck_summary), from a report of the TCK's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.testing.tck_summary import main, render

REPORT = {
    "per_requirement": {
        "CORE-SEND-001": {"level": "MUST", "transports": {"jsonrpc": "PASS", "grpc": "FAIL"}},
        "CORE-CAP-001": {"level": "MUST", "transports": {"jsonrpc": "SKIPPED"}},
        "CARD-DISC-001": {"level": "MUST", "transports": {"agent_card": "PASS"}},
        "AUTH-TLS-001": {"level": "MUST", "transports": {}},
        "CARD-CACHE-001": {"level": "SHOULD", "transports": {"agent_card": "FAIL"}},
    }
}


def test_must_requirements_are_counted_per_transport():
    text = render(REPORT, ("jsonrpc", "grpc"))
    assert "| jsonrpc | 1 | 0 | 1 |" in text
    assert "| grpc | 0 | 1 | 0 |" in text
    assert "| agent_card | 1 | 0 | 0 |" in text
    assert "- grpc failed: CORE-SEND-001" in text
    assert "- jsonrpc skipped: CORE-CAP-001" in text
    assert "not tested on the transports run: AUTH-TLS-001" in text
    assert "CARD-CACHE-001" not in text


def test_the_command_reads_a_report_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "compatibility.json"
    path.write_text(json.dumps(REPORT), encoding="utf-8")
    main([str(path), "jsonrpc"])
    out = capsys.readouterr().out
    assert "| jsonrpc | 1 | 0 | 1 |" in out and "| grpc |" not in out


def test_another_level_is_counted_when_asked():
    text = render(REPORT, ("jsonrpc",), "SHOULD")
    assert text.startswith("SHOULD requirements")
    assert "| agent_card | 0 | 1 | 0 |" in text
