"""kill -9 of a worker between two tool steps of an ``llm`` turn (real processes, PostgreSQL):
after the takeover the turn completes, the tool whose result was saved ran once, and no
answered model step was asked again."""

from __future__ import annotations

import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from app.tasks import states
from app.testing.edge import edge_harness
from app.testing.fake_model import FakeModelServer, text, tool_call
from tests.worker.helpers import history, reached, send, task_row
from tests.worker.processes import CLI, WorkerProcess, worker_env
from tests.worker.test_processes import until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

PLUGIN = '''
"""A crash-test plugin: each call appends its label to the file named by CRASH_LOG."""


async def record(ctx, label: str) -> str:
    """Record a label."""
    with open(ctx.secrets["CRASH_LOG"], "a") as log:
        log.write(label + "\\n")
    return f"recorded {label}"


class Plugin:
    key = "crashtest"
    tools = (record,)
    secrets = ("CRASH_LOG",)


plugin = Plugin()
'''


def _install_plugin(where: Path) -> None:
    """A plugin an importlib.metadata scan finds on PYTHONPATH, without pip."""
    (where / "crashtest_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = where / "crashtest_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: crashtest-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[looping_edge.plugins]\ncrashtest = crashtest_plugin:plugin\n"
    )


def _start(pg_url: str, tmp: Path, name: str, plugins: Path, log: Path) -> WorkerProcess:
    env = worker_env(pg_url)
    env.update(PYTHONPATH=str(plugins), CRASH_LOG=str(log))
    out = tmp / f"{name}.log"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [CLI, "worker"], env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=str(tmp)
        )
    return WorkerProcess(proc, out)


async def test_a_takeover_resumes_from_the_last_saved_step(pg_url: str, tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    _install_plugin(plugins)
    log = tmp_path / "calls.log"
    with FakeModelServer() as fake:
        fake.script(
            tool_call("record", {"label": "a"}, call_id="c1"),
            tool_call("record", {"label": "b"}, call_id="c2", delay=30),  # killed during this
            tool_call("record", {"label": "b"}, call_id="c2"),
            text("all recorded"),
        )
        config = {
            "model": {"base_url": fake.base_url, "name": "fake"},
            "system_prompt": "You record.",
            "tools": ["record"],
        }
        async with edge_harness(pg_url) as edge:
            await edge.add_tenant(
                "demo", agent="llm", agent_config=config, require_push_config=False
            )
            db = edge.services.db
            victim = _start(pg_url, tmp_path, "victim", plugins, log)
            try:
                task_id = await send(edge, "record a then b", message_id="m-1", push_url=None)
                await until(lambda: len(fake.requests) >= 2 or None, victim)
                victim.signal(signal.SIGKILL)
                victim.proc.wait(timeout=10)
            finally:
                if victim.proc.poll() is None:
                    victim.proc.kill()
            rescuer = _start(pg_url, tmp_path, "rescuer", plugins, log)
            try:
                await until(lambda: reached(db, task_id, *states.TERMINAL), rescuer, timeout=40)
                row = await task_row(db, task_id)
                replies = [m for m in await history(db, task_id) if m["role"] == "ROLE_AGENT"]
            finally:
                rescuer.proc.terminate()
                rescuer.proc.wait(timeout=15)
    assert row.state == states.COMPLETED, rescuer.logs()[-3000:]
    assert replies[-1]["parts"][0]["text"] == "all recorded"
    assert log.read_text().split() == ["a", "b"]  # the saved tool ran once; b once
    bodies = [r.messages for r in fake.requests]
    assert len(bodies) == 4
    # The first step was answered before the kill: asked once. The second was in flight
    # when the worker died (never answered): asked again, with the same messages.
    assert sum(1 for m in bodies if not any(x["role"] == "tool" for x in m)) == 1
    assert bodies[1] == bodies[2]
    assert bodies[3][-1] == {"role": "tool", "tool_call_id": "c2", "content": "recorded b"}
