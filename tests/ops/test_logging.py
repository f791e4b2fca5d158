"""Structured logging (app/ops/logging.py): tokens, keys, push credentials and prompts are
never logged, whatever EDGE_LOG_LEVEL and EDGE_LOG_JSON say."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.db.engine import Database
from app.ops.logging import JsonFormatter, PlainFormatter, configure_logging

SECRET = "SECRET-PROMPT-7731"


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    quiet = {name: logging.getLogger(name).level for name in ("aiosqlite", "sqlalchemy")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, saved in quiet.items():
        logging.getLogger(name).setLevel(saved)


def _failed_record() -> logging.LogRecord:
    try:
        raise RuntimeError(f"INSERT INTO turns ... parameters: ('{SECRET}',)")
    except RuntimeError:
        record = logging.LogRecord(
            "looping", logging.ERROR, __file__, 1, "rpc call failed", (), None
        )
        record.exc_info = sys.exc_info()
    return record


@pytest.mark.parametrize("formatter", [PlainFormatter(), JsonFormatter()])
def test_an_exception_is_logged_by_type_never_by_its_text(formatter: logging.Formatter) -> None:
    # Found by audit: with EDGE_LOG_JSON=false a failed call's traceback printed the driver's
    # error text, which carries the SQL's parameters (the prompt).
    record = _failed_record()
    logging.Formatter().format(record)  # another handler formatted it first and cached it
    line = formatter.format(record)
    assert SECRET not in line
    assert "RuntimeError" in line


def test_the_plain_traceback_keeps_its_frames() -> None:
    line = PlainFormatter().format(_failed_record())
    assert "Traceback (most recent call last)" in line and "_failed_record" in line


@pytest.mark.parametrize("json_logs", [True, False])
async def test_debug_level_does_not_log_the_statements_parameters(
    restored_logging: None, capfd: pytest.CaptureFixture[str], tmp_path: Path, json_logs: bool
) -> None:
    # Found by audit: at EDGE_LOG_LEVEL=DEBUG aiosqlite logged every statement with its
    # parameters, every prompt included.
    configure_logging("DEBUG", json_logs=json_logs)
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        async with db.transaction() as s:
            await s.execute(text("CREATE TABLE t (v TEXT)"))
            await s.execute(text("INSERT INTO t VALUES (:v)"), {"v": SECRET})
        logging.getLogger("looping").debug("still logged")
    finally:
        await db.dispose()
    err = capfd.readouterr().err
    assert SECRET not in err
    assert "still logged" in err
    if json_logs:
        assert all(json.loads(line) for line in err.splitlines())


def _record(msg: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("looping.worker", logging.INFO, __file__, 1, msg, (), None)
    record.__dict__.update(extra)
    return record


def test_plain_lines_carry_the_json_fields_as_key_value_pairs() -> None:
    # Found by trying the quickstart: the plain lines dropped task_id, reason, outcome …
    record = _record(
        "turn.failed",
        tenant="demo",
        task_id="t-1",
        outcome="failed",
        reason="the agent could not be built",
        token=SECRET,  # not a logged field: never shown, in either format
        push_url=f"https://gw.test/push?token={SECRET}",
    )
    line = PlainFormatter().format(record)
    assert line.endswith(
        " INFO looping.worker turn.failed tenant=demo task_id=t-1 outcome=failed "
        'reason="the agent could not be built"'
    )
    assert SECRET not in line
    doc = json.loads(JsonFormatter().format(record))
    assert {k: doc[k] for k in ("tenant", "task_id", "outcome", "reason")} == {
        "tenant": "demo",
        "task_id": "t-1",
        "outcome": "failed",
        "reason": "the agent could not be built",
    }
    assert SECRET not in json.dumps(doc)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("plain", "plain"),
        ("a=b", '"a=b"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("two\nlines", '"two\\nlines"'),
        ("red \x1b[31m", '"red \\u001b[31m"'),
        ("", '""'),
        (3, "3"),
    ],
)
def test_a_plain_value_reads_back_and_cannot_split_the_line(value: object, shown: str) -> None:
    line = PlainFormatter().format(_record("m", reason=value))
    assert line.endswith(f" m reason={shown}") and "\n" not in line


def test_plain_fields_come_before_the_traceback() -> None:
    record = _failed_record()
    record.task_id = "t-9"
    first, *rest = PlainFormatter().format(record).splitlines()
    assert first.endswith("rpc call failed task_id=t-9")
    assert rest[0] == "Traceback (most recent call last):"


def test_a_failed_jwks_fetch_names_its_origin_and_result() -> None:
    # app/security/jwks.py logs both; both formats had dropped them.
    record = _record("gateway JWKS fetch failed", origin="https://gw.test", result="timeout")
    assert PlainFormatter().format(record).endswith(" origin=https://gw.test result=timeout")
    doc = json.loads(JsonFormatter().format(record))
    assert (doc["origin"], doc["result"]) == ("https://gw.test", "timeout")
