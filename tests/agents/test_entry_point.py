"""The ``python`` agent kind (app/agents/entry_point.py): the author's own factory, by import
path, built per turn; and the harness running an author's agents end to end."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from app.agents.contract import AgentReply
from app.agents.entry_point import AgentEntryError, PythonEntryPoints, entry_of
from app.agents.registry import AgentBuildFailed, AgentRegistry, default_registry
from app.tasks import states
from app.testing.edge import edge_harness
from tests.agents import sample_agent
from tests.agents.helpers import context, user_message
from tests.polling import poll_until
from tests.tasks.conftest import send_params

ENTRY = "tests.agents.sample_agent:build"


async def test_an_entry_builds_the_authors_agent_with_the_rest_of_the_config() -> None:
    agent = PythonEntryPoints().build({"entry": ENTRY, "greeting": "hi"})
    assert sample_agent.BUILT[-1] == {"greeting": "hi"}  # the entry itself is ours
    result = await agent.run(context(user_message("Ada")))
    assert result == AgentReply(text="hi, Ada")


def test_the_default_registry_has_the_python_kind() -> None:
    agent = default_registry().build("python", {"entry": ENTRY})
    assert isinstance(agent, sample_agent.Greeter)


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"entry": 5},
        {"entry": ""},
        {"entry": "tests.agents.sample_agent"},
        {"entry": "tests.agents.sample_agent:"},
        {"entry": ":build"},
        {"entry": "../evil:build"},
        {"entry": "os:system; rm"},
        {"entry": "tests.agents.sample_agent:build\n"},
    ],
)
def test_an_entry_of_the_wrong_shape_is_refused(config: dict[str, Any]) -> None:
    with pytest.raises(AgentEntryError, match=r"package\.module:factory"):
        entry_of(config)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("tests.agents.no_such_module:build", "cannot import tests.agents.no_such_module"),
        ("tests.agents.sample_agent:missing", "has no missing"),
        ("tests.agents.sample_agent:NOT_CALLABLE", "is not callable"),
        ("tests.agents.sample_agent:broken", "raised RuntimeError"),
        ("tests.agents.sample_agent:not_an_agent", "without a run method"),
    ],
)
def test_an_entry_that_cannot_give_an_agent_says_why(entry: str, reason: str) -> None:
    with pytest.raises(AgentBuildFailed) as failed:
        default_registry().build("python", {"entry": entry})
    assert reason in str(failed.value)
    assert "secret-ish" not in str(failed.value)  # the author's exception text stays out


def test_a_module_is_imported_once_per_process() -> None:
    imported: list[str] = []

    def importer(name: str) -> Any:
        imported.append(name)
        return sample_agent

    entries = PythonEntryPoints(importer)
    for _ in range(3):
        entries.build({"entry": ENTRY})
    assert imported == ["tests.agents.sample_agent"]


async def _run_turn(db_url: str, agent: str, config: dict[str, Any], **harness: Any) -> Any:
    async with edge_harness(db_url, background=True, poll_seconds=0.05, **harness) as edge:
        await edge.add_tenant("author", agent=agent, agent_config=config, require_push_config=False)
        accepted = await edge.result(
            "SendMessage", send_params(text="Ada", push=None), tenant="author"
        )
        task_id = accepted["task"]["id"]

        async def finished() -> Any:
            task = await edge.result("GetTask", {"id": task_id}, tenant="author")
            return task if task["status"]["state"] in states.TERMINAL else None

        return await poll_until(finished, 10, interval=0.02, what="a terminal task")


def _reply(task: Any) -> str:
    return str(task["status"]["message"]["parts"][0]["text"])


async def test_a_python_tenant_runs_the_authors_agent_end_to_end(db_url: str) -> None:
    task = await _run_turn(db_url, "python", {"entry": ENTRY, "greeting": "welcome"})
    assert task["status"]["state"] == states.COMPLETED
    assert _reply(task) == "welcome, Ada"


async def test_the_harness_runs_an_authors_own_registry(db_url: str) -> None:
    agents = AgentRegistry({"greeter": lambda config: sample_agent.Greeter("hey")})
    task = await _run_turn(db_url, "greeter", {}, agents=agents)
    assert task["status"]["state"] == states.COMPLETED
    assert _reply(task) == "hey, Ada"


async def test_a_python_entry_that_does_not_import_fails_the_task_and_says_why_in_the_log(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    task = await _run_turn(db_url, "python", {"entry": "tests.agents.no_such_module:build"})
    assert task["status"]["state"] == states.FAILED
    (record,) = [r for r in caplog.records if r.getMessage() == "turn.agent_build_failed"]
    assert record.agent_kind == "python"  # type: ignore[attr-defined]
    assert "cannot import tests.agents.no_such_module" in record.reason  # type: ignore[attr-defined]
