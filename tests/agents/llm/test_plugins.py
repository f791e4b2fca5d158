"""Plugins: start-time validation (one line each), gates, hooks, sequential tools, secrets,
capability text, displaced messages."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from app.agents.contract import AgentReply
from app.agents.llm.plugins import PluginError, build_plugins
from app.agents.llm.session import MemorySessions
from app.agents.llm.tools import ToolContext
from app.testing.fake_model import FakeModelServer, text, tool_call, tool_calls
from tests.agents.llm.kit import run_turn, runtime, turn


async def ping(ctx: ToolContext, word: str = "hi") -> str:
    """Answer with the word and the secret's length."""
    return f"{word} {len(ctx.secrets.get('PING_KEY', ''))} {ctx.idempotency_key}"


class Ping:
    key = "ping"
    tools = (ping,)
    capability = "You can ping."
    secrets = ("PING_KEY",)


def _plugin(**attrs: Any) -> object:
    return SimpleNamespace(**{"key": "p", "tools": (), **attrs})


async def other() -> str:
    """Other."""
    return "x"


@pytest.mark.parametrize(
    ("objects", "environ", "line"),
    [
        ([_plugin(), _plugin()], {}, "two plugins have the key 'p'"),
        (
            [_plugin(tools=(other,)), _plugin(key="q", tools=(other,))],
            {},
            "two tools are named 'other'",
        ),
        ([Ping()], {}, "plugin 'ping' needs the environment variable PING_KEY"),
        ([_plugin(contract_version=99)], {}, "speaks contract version 99"),
        ([_plugin(key="")], {}, "has no key"),
    ],
)
def test_bad_plugin_sets_are_one_line(
    objects: list[object], environ: dict[str, str], line: str
) -> None:
    with pytest.raises(PluginError) as caught:
        build_plugins(objects, environ)
    assert line in str(caught.value) and "\n" not in str(caught.value)


def test_a_plugin_tool_cannot_take_the_builtin_name() -> None:
    from app.agents.llm.hitl import ASK_USER_TOOL

    async def ask_user(question: str) -> str:
        """Mine."""
        return question

    with pytest.raises(PluginError, match="two tools are named 'ask_user'"):
        build_plugins([_plugin(tools=(ask_user,))], {}, builtins=[ASK_USER_TOOL])


def test_schema_comes_from_annotations() -> None:
    plugins = build_plugins([Ping()], {"PING_KEY": "abc"})
    tool = plugins.tools["ping"]
    assert tool.description.startswith("Answer with the word")
    assert tool.schema["properties"]["word"]["type"] == "string"
    assert "ctx" not in tool.schema["properties"]


async def test_capability_secrets_and_idempotency_key_reach_the_tool(fake: FakeModelServer) -> None:
    plugins = build_plugins([Ping()], {"PING_KEY": "abc"})
    fake.script(tool_call("ping", {"word": "yo"}, call_id="c9"), text("ok"))
    await run_turn(fake, runtime(plugins=plugins), turn("go"), tools=["ping"])
    assert "You can ping." in fake.requests[0].messages[0]["content"]
    assert fake.requests[1].messages[-1]["content"] == "yo 3 t-1:c9"


async def test_a_gate_saying_no_completes_without_a_model_call(fake: FakeModelServer) -> None:
    gates = [
        _plugin(key="a", should_handle_turn=lambda ctx: True),
        _plugin(key="b", should_handle_turn=lambda ctx: False),
    ]
    result = await run_turn(fake, runtime(plugins=build_plugins(gates, {})), turn("go"))
    assert result == AgentReply() and not fake.requests


async def test_a_failing_gate_counts_as_yes(fake: FakeModelServer) -> None:
    def broken(ctx: object) -> bool:
        raise RuntimeError("gate broke")

    fake.script(text("ran"))
    plugins = build_plugins([_plugin(should_handle_turn=broken)], {})
    assert await run_turn(fake, runtime(plugins=plugins), turn("go")) == AgentReply(text="ran")


async def test_before_hook_blocks_and_after_hook_rewrites(fake: FakeModelServer) -> None:
    async def before(ctx: ToolContext, tool: str, args: dict[str, Any]) -> str | None:
        return "not on Sundays" if args.get("word") == "blocked" else None

    def after(ctx: ToolContext, tool: str, args: dict[str, Any], result: str) -> str:
        return result.upper()

    plugins = build_plugins(
        [Ping(), _plugin(key="guard", before_tool_call=before, after_tool_call=after)],
        {"PING_KEY": "k"},
    )
    fake.script(
        tool_calls(("ping", {"word": "blocked"}, "c1"), ("ping", {"word": "fine"}, "c2")),
        text("ok"),
    )
    await run_turn(fake, runtime(plugins=plugins), turn("go"), tools=["ping"])
    results = [m["content"] for m in fake.requests[1].messages if m["role"] == "tool"]
    assert results == ["blocked: not on Sundays", "FINE 1 T-1:C2"]


ORDER: list[str] = []


async def step_a() -> str:
    """A."""
    ORDER.append("a-start")
    await asyncio.sleep(0.05)
    ORDER.append("a-end")
    return "a"


async def step_b() -> str:
    """B."""
    ORDER.append("b-start")
    return "b"


async def test_one_sequential_tool_makes_the_batch_sequential(fake: FakeModelServer) -> None:
    ORDER.clear()
    plugins = build_plugins([_plugin(tools=(step_a, step_b), sequential=("step_b",))], {})
    fake.script(tool_calls(("step_a", {}, "c1"), ("step_b", {}, "c2")), text("ok"))
    await run_turn(fake, runtime(plugins=plugins), turn("go"), tools=["step_a", "step_b"])
    assert ORDER == ["a-start", "a-end", "b-start"]


async def test_displaced_messages_reach_the_hook(fake: FakeModelServer) -> None:
    seen: list[int] = []

    async def displaced(ctx: object, messages: list[object]) -> None:
        seen.append(len(messages))

    plugins = build_plugins([_plugin(on_messages_displaced=displaced)], {})
    sessions = MemorySessions()
    rt = runtime(plugins=plugins, sessions=sessions)
    fake.script(text("a" * 8000))
    await run_turn(fake, rt, turn("first " * 10, task_id="t-1"), session_max_tokens=1000)
    fake.script(text("summary of it"), text("second answer"))
    await run_turn(
        fake, rt, turn("second", task_id="t-2", message_id="m-2"), session_max_tokens=1000
    )
    assert seen == [2]
    ids = [e.id for e in sessions.transcript("demo", "user-1").items]
    assert ids[0].startswith("summary:") and all(not i.startswith("task:t-1") for i in ids)
    assert "summary of it" in fake.requests[-1].messages[1]["content"]
