from __future__ import annotations

import asyncio

import pytest

from app.agents.contract import AgentFailure, AgentQuestion, AgentReply, TurnStopped
from app.agents.echo import EchoAgent
from app.agents.kinds import AGENT_KINDS
from app.agents.registry import AgentBuildFailed, AgentRegistry, UnknownAgentKind, default_registry
from app.agents.scripted import ScriptCrash, ScriptedAgent, parse_script
from tests.agents.helpers import Recorder, agent_message, context, user_message


async def test_echo_replies_with_the_text_of_the_message() -> None:
    msg = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}, {"data": 1}]}
    assert await EchoAgent().run(context(msg)) == AgentReply(text="hi")


def test_registry_matches_the_kinds_the_cli_offers() -> None:
    assert set(default_registry().kinds()) == set(AGENT_KINDS)


def test_registry_refuses_unknown_and_duplicate_kinds() -> None:
    registry = default_registry()
    with pytest.raises(UnknownAgentKind):
        registry.build("gpt", {})
    with pytest.raises(AgentBuildFailed, match="model: required"):
        registry.build("llm", {})
    with pytest.raises(ValueError):
        registry.register("echo", EchoAgent.from_config)
    assert isinstance(AgentRegistry({"x": EchoAgent.from_config}).build("x", {}), EchoAgent)


async def run(script: str, **kwargs: object):  # type: ignore[no-untyped-def]
    return await ScriptedAgent().run(context(user_message(script), **kwargs))  # type: ignore[arg-type]


async def test_scripted_without_directives_echoes() -> None:
    assert await run("hello\nworld") == AgentReply(text="hello\nworld")


async def test_scripted_progress_then_reply_with_artifacts() -> None:
    progress = Recorder()
    result = await run(
        'progress thinking\nartifact text a note\nartifact data {"n": 1}\nreply done',
        progress=progress,
    )
    assert progress.steps == [("line-1", "thinking")]
    assert result == AgentReply(
        text="done",
        artifacts=(
            {"artifactId": "artifact-2", "parts": [{"text": "a note"}]},
            {"artifactId": "artifact-3", "parts": [{"data": {"n": 1}}]},
        ),
    )


async def test_scripted_reply_ends_the_script() -> None:
    progress = Recorder()
    assert await run("reply first\nprogress never", progress=progress) == AgentReply(text="first")
    assert progress.steps == []


async def test_scripted_fail_and_ask_and_auth() -> None:
    assert await run("fail no way") == AgentFailure(text="no way")
    assert await run("ask which colour?\nreply x") == AgentQuestion(text="which colour?")
    assert await run("auth sign in please") == AgentQuestion(text="sign in please", auth=True)


async def test_scripted_resume_continues_after_the_answered_ask() -> None:
    script = user_message("progress a\nask colour?\nprogress b\nreply got {answer}", "m-1")
    answer = user_message("blue", "m-2")
    history = [script, agent_message("colour?"), answer]
    progress = Recorder()
    ctx = context(answer, history=history, kind="resume", progress=progress, resume_answer="blue")
    assert await ScriptedAgent().run(ctx) == AgentReply(text="got blue")
    assert progress.steps == [("line-3", "b")]


async def test_scripted_second_ask_after_first_answer() -> None:
    script = user_message("ask one?\nask two?\nreply {answer}", "m-1")
    first = user_message("1", "m-2")
    # The incoming message may or may not be in the history already: counted once either way.
    for history in ([script, agent_message("one?"), first], [script, agent_message("one?")]):
        ctx = context(first, history=history, kind="resume", resume_answer="1")
        assert await ScriptedAgent().run(ctx) == AgentQuestion(text="two?")


async def test_scripted_crash_every_attempt_or_first_n() -> None:
    with pytest.raises(ScriptCrash):
        await run("crash\nreply x", attempt=3)
    with pytest.raises(ScriptCrash):
        await run("crash 2\nreply ok {attempt}", attempt=2)
    assert await run("crash 2\nreply ok {attempt}", attempt=3) == AgentReply(text="ok 3")


async def test_scripted_malformed_directives_are_echoed() -> None:
    script = "sleep soon\nsleep -1\nartifact data {bad\nartifact blob x\ncrash twice\nprogress"
    assert await run(script) == AgentReply(text=script)


async def test_scripted_sleep_is_cancellable() -> None:
    task = asyncio.create_task(run("sleep 30\nreply late"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_scripted_stops_when_progress_is_refused() -> None:
    with pytest.raises(TurnStopped):
        await run("progress a\nreply b", progress=Recorder(refuse=True))


async def test_scripted_stops_between_steps_once_cancelled() -> None:
    ctx = context(user_message("progress a\nreply b"))
    ctx.cancelled.set()
    with pytest.raises(TurnStopped):
        await ScriptedAgent().run(ctx)


def test_parse_script_keeps_line_numbers() -> None:
    lines = parse_script("\n  reply  hi there \n\nfail x")
    assert [(line.number, line.keyword, line.argument) for line in lines] == [
        (2, "reply", "hi there"),
        (4, "fail", "x"),
    ]
