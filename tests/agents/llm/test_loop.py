"""The loop's rules against the real-HTTP fake model: tool batches, fixed wording for bad
calls, output caps, max_steps, artifacts, progress ids."""

from __future__ import annotations

import asyncio
import json

from app.agents.contract import AgentReply
from app.agents.llm import batch
from app.agents.llm.plugins import build_plugins
from app.agents.llm.tools import ToolError, ToolOutput
from app.testing.fake_model import FakeModelServer, text, tool_call, tool_calls
from tests.agents.helpers import Recorder
from tests.agents.llm.kit import run_turn, runtime, turn

ORDER: list[str] = []


async def slow(ctx: object, label: str) -> str:
    """Wait a little, then return the label."""
    await asyncio.sleep(0.2 if label == "first" else 0.01)
    ORDER.append(label)
    return f"slow {label}"


async def lookup(q: int) -> str:
    """Look q up."""
    return f"found {q}"


async def explode() -> str:
    """Always fails."""
    raise RuntimeError("secret detail")


async def refuse() -> str:
    """Fails on purpose with a message for the model."""
    raise ToolError("the service said no")


async def huge() -> str:
    """A 50 MB output."""
    return "x" * (50 * 1024 * 1024)


async def hang() -> str:
    """Never finishes."""
    await asyncio.sleep(3600)
    return "never"


async def make_artifact() -> ToolOutput:
    """Produces an artifact."""
    return ToolOutput("made", artifacts=({"artifactId": "a-1", "parts": [{"text": "file"}]},))


class Tools:
    key = "t"
    tools = (slow, lookup, explode, refuse, huge, hang, make_artifact)


def _results(fake: FakeModelServer, index: int) -> list[dict[str, object]]:
    return [m for m in fake.requests[index].messages if m["role"] == "tool"]


ALL = ["slow", "lookup", "explode", "refuse", "huge", "hang", "make_artifact"]


async def test_a_plain_answer_completes_the_task(fake: FakeModelServer) -> None:
    fake.script(text("hello there"))
    result = await run_turn(fake, runtime(), turn("hi"))
    assert result == AgentReply(text="hello there")
    sent = fake.requests[0].messages
    assert sent[0]["role"] == "system" and "You are a test agent." in sent[0]["content"]
    assert "Current date (UTC):" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "hi"}


async def test_parallel_results_keep_the_models_call_order(fake: FakeModelServer) -> None:
    ORDER.clear()
    plugins = build_plugins([Tools()], {})
    fake.script(
        tool_calls(("slow", {"label": "first"}, "c1"), ("slow", {"label": "second"}, "c2")),
        text("done"),
    )
    progress = Recorder()
    result = await run_turn(
        fake, runtime(plugins=plugins), turn("go", progress=progress), tools=ALL
    )
    assert result == AgentReply(text="done")
    assert ORDER == ["second", "first"]  # ran together: the short one finished first
    results = _results(fake, 1)
    assert [r["tool_call_id"] for r in results] == ["c1", "c2"]
    assert [r["content"] for r in results] == ["slow first", "slow second"]
    keys = [k for k, _ in progress.steps]
    assert keys == ["step-1", "step-2", "step-3"]  # the response, then each result


async def test_bad_calls_go_back_to_the_model_in_fixed_wording(fake: FakeModelServer) -> None:
    plugins = build_plugins([Tools()], {})
    fake.script(
        tool_calls(
            ("nope", {}, "c1"),
            ("lookup", "{not json", "c2"),
            ("lookup", {"q": "abc"}, "c3"),
            ("explode", {}, "c4"),
            ("refuse", {}, "c5"),
            ("lookup", {"q": 7}, "c6"),
        ),
        text("ok"),
    )
    result = await run_turn(fake, runtime(plugins=plugins), turn("go"), tools=ALL)
    assert result == AgentReply(text="ok")
    contents = [r["content"] for r in _results(fake, 1)]
    assert contents[0].startswith("error: there is no tool named 'nope'; the tools are: ")
    assert contents[1] == batch.BAD_JSON
    assert contents[2].startswith("error: the arguments do not fit the tool's schema (q:")
    assert contents[3] == "error: the tool failed (RuntimeError)"
    assert "secret detail" not in json.dumps(fake.requests[1].body)
    assert contents[4] == "error: the service said no"
    assert contents[5] == "found 7"


async def test_a_50_mb_output_is_cut_and_says_so(fake: FakeModelServer) -> None:
    plugins = build_plugins([Tools()], {})
    fake.script(tool_call("huge"), text("ok"))
    await run_turn(
        fake, runtime(plugins=plugins), turn("go"), tools=ALL, max_tool_output_bytes=1024
    )
    content = _results(fake, 1)[0]["content"]
    assert isinstance(content, str) and len(content) < 1200
    assert content.endswith(f"[output cut: the first 1024 of {50 * 1024 * 1024} bytes are shown]")


async def test_a_tool_past_its_timeout_is_an_error_result(fake: FakeModelServer) -> None:
    plugins = build_plugins([Tools()], {})
    fake.script(tool_call("hang"), text("ok"))
    await run_turn(fake, runtime(plugins=plugins), turn("go"), tools=ALL, tool_timeout_seconds=0.2)
    assert _results(fake, 1)[0]["content"] == batch.timed_out(0.2)


async def test_max_steps_ends_with_one_call_without_tools(fake: FakeModelServer) -> None:
    plugins = build_plugins([Tools()], {})
    fake.script(tool_call("lookup", {"q": 1}), tool_call("lookup", {"q": 2}), text("final"))
    result = await run_turn(fake, runtime(plugins=plugins), turn("go"), tools=ALL, max_steps=2)
    assert result == AgentReply(text="final")
    assert len(fake.requests) == 3
    assert fake.requests[1].tool_names and not fake.requests[2].tool_names


async def test_artifacts_of_tools_come_with_the_reply(fake: FakeModelServer) -> None:
    plugins = build_plugins([Tools()], {})
    fake.script(tool_call("make_artifact"), text("here"))
    result = await run_turn(fake, runtime(plugins=plugins), turn("go"), tools=ALL)
    assert isinstance(result, AgentReply) and result.artifacts[0]["artifactId"] == "a-1"


async def test_only_the_configured_tools_are_offered(fake: FakeModelServer) -> None:
    plugins = build_plugins([Tools()], {})
    fake.script(tool_call("explode"), text("ok"))
    await run_turn(fake, runtime(plugins=plugins), turn("go"), tools=["lookup"])
    assert sorted(fake.requests[0].tool_names) == ["ask_user", "lookup"]
    assert _results(fake, 1)[0]["content"].startswith("error: there is no tool named 'explode'")


async def test_cancellation_aborts_the_in_flight_model_call(fake: FakeModelServer) -> None:
    fake.script(text("late", delay=2.0))
    task = asyncio.create_task(run_turn(fake, runtime(), turn("go")))
    await asyncio.sleep(0.3)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    assert done and task.cancelled()


async def test_a_refused_progress_write_stops_the_turn(fake: FakeModelServer) -> None:
    import pytest

    from app.agents.contract import TurnStopped

    plugins = build_plugins([Tools()], {})
    fake.script(tool_call("lookup", {"q": 1}), tool_call("lookup", {"q": 2}), text("never"))
    with pytest.raises(TurnStopped):
        await run_turn(
            fake, runtime(plugins=plugins), turn("go", progress=Recorder(refuse=True)), tools=ALL
        )
    assert len(fake.requests) <= 2  # stopped at the next step, never reaching the answer


KEYS: list[str] = []


async def slow_once(ctx: object) -> str:
    """Hangs on its first call (the worker dies there), answers on the next."""
    KEYS.append(ctx.idempotency_key)  # type: ignore[attr-defined]
    if len(KEYS) == 1:
        await asyncio.sleep(3600)
    return "finished"


class Once:
    key = "once"
    tools = (slow_once,)


async def test_a_tool_killed_mid_call_runs_again_with_the_same_key(fake: FakeModelServer) -> None:
    from app.agents.llm.session import MemorySessions

    KEYS.clear()
    sessions = MemorySessions()
    plugins = build_plugins([Once()], {})
    fake.script(tool_call("slow_once", call_id="c1"), text("done"))
    first = asyncio.create_task(
        run_turn(fake, runtime(plugins=plugins, sessions=sessions), turn("go"), tools=["slow_once"])
    )
    while not KEYS:
        await asyncio.sleep(0.01)
    first.cancel()  # the worker dies while the tool runs
    await asyncio.gather(first, return_exceptions=True)
    again = await run_turn(
        fake, runtime(plugins=plugins, sessions=sessions), turn("go"), tools=["slow_once"]
    )
    assert again == AgentReply(text="done")
    assert KEYS == ["t-1:c1", "t-1:c1"]  # ran again, with the same idempotency key
    assert len(fake.requests) == 2  # the answered model step was not asked again
