"""``looping-edge push dead|replay`` against the real database."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.cli.main import main
from app.testing.push_faults import fail_first
from tests.push.conftest import PushRig


async def _cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], db_url: str, *argv: str
) -> tuple[int, str, str]:
    monkeypatch.setenv("DATABASE_URL", db_url)
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def test_dead_lists_and_replay_requeues(
    rig: PushRig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    await rig.add_config("t1")
    await rig.queue("t1", "final", kind="final")
    rig.rx.fault = fail_first(1, status=400)
    deliverer = await rig.start()
    [row] = await rig.wait_rows(lambda rs: rs[0].status == "dead")

    code, out, _ = await _cli(monkeypatch, capsys, rig.db_url, "push", "dead", "--json")
    assert code == 0
    [dead] = json.loads(out)["dead"]
    assert dead["id"] == row.id and dead["taskId"] == "t1" and dead["kind"] == "final"
    assert dead["messageId"] == "t1:final"
    assert (dead["attempts"], dead["lastStatus"], dead["lastError"]) == (1, 400, "HTTP 400")
    assert dead["tenant"] == "demo" and dead["createdAt"]

    code, out, _ = await _cli(monkeypatch, capsys, rig.db_url, "push", "dead")
    assert code == 0 and "HTTP 400" in out and "t1" in out

    code, out, _ = await _cli(monkeypatch, capsys, rig.db_url, "push", "replay", str(row.id))
    assert code == 0 and f"re-queued 1 push(es): {row.id}" in out
    deliverer.wake()
    await rig.rx.wait_for(lambda p: p.message_id == "t1:final")
    await rig.wait_rows(lambda rs: rs[0].status == "delivered")

    code, out, _ = await _cli(monkeypatch, capsys, rig.db_url, "push", "dead")
    assert code == 0 and "no dead letters" in out


async def test_replay_all_and_usage_errors(
    rig: PushRig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for task in ("t1", "t2"):
        await rig.add_config(task)
        await rig.queue(task, "final", kind="final")
    rig.rx.fault = fail_first(2, status=404)
    await rig.start()
    await rig.wait_rows(lambda rs: len(rs) == 2 and all(r.status == "dead" for r in rs))
    code, out, _ = await _cli(monkeypatch, capsys, rig.db_url, "push", "replay", "--all")
    assert code == 0 and "re-queued 2 push(es)" in out
    await rig.wait_rows(lambda rs: all(r.status == "delivered" for r in rs))

    code, _, err = await _cli(monkeypatch, capsys, rig.db_url, "push", "replay")
    assert code == 2 and "IDs or --all" in err
    code, _, err = await _cli(monkeypatch, capsys, rig.db_url, "push", "replay", "1", "--all")
    assert code == 2
    code, out, _ = await _cli(monkeypatch, capsys, rig.db_url, "push", "replay", "424242")
    assert code == 1 and "424242" in out


async def test_unmigrated_database_is_one_clear_line(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/empty.db"
    code, _, err = await _cli(monkeypatch, capsys, url, "push", "dead")
    assert code == 69 and "migrated" in err and "Traceback" not in err
