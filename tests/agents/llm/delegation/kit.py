"""A delegating ``llm`` agent's config for tests against the fake model server, and an edge
that runs it (in-process worker) for the gateway tests."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from app.agents.llm.events import Subscriber
from app.agents.llm.plugins import build_plugins
from app.agents.llm.runtime import LlmRuntime
from app.agents.registry import default_registry
from app.db.engine import Database
from app.db.storage import open_storage
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.fake_model import FakeModelServer, Step, tool_call
from app.testing.gateway import GatewayKit

FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01, "push_retry_base_seconds": 0.01}

POLICY = {
    "round_contract": "CONTRACT: call one tool; types: {types}; at most {max_subtasks}.",
    "final_round_note": "FINAL: reply now (of {max_rounds} rounds).",
    "task_failed": "POLICY FAILURE TEXT",
    "recovered_reply": "RECOVERED REPLY",
    "partial_note": "PARTIAL NOTE",
}

RESEARCH_PROMPT = "You are the research subagent."
SUMMARY_PROMPT = "You are the summary subagent."


def delegation(**extra: Any) -> dict[str, Any]:
    return {
        "recipes": [
            {"key": "research", "system_prompt": RESEARCH_PROMPT, "tools": ["lookup", "nope"]},
            {"key": "summarize", "system_prompt": SUMMARY_PROMPT},
        ],
        "policy": dict(POLICY),
        **extra,
    }


def config(
    fake: FakeModelServer, fallback: FakeModelServer | None = None, **extra: Any
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": {"base_url": fake.base_url, "name": "main-model"},
        "system_prompt": "You are the host agent.",
        "tools": ["lookup"],
        "delegation": delegation(**extra),
    }
    if fallback is not None:
        doc["fallback_model"] = {"base_url": fallback.base_url, "name": "fallback-model"}
    return doc


def delegate(*prompts: str, reply: str = "Looking into it", kind: str = "research") -> Step:
    subtasks = [{"type": kind, "prompt": p, "params": {"n": str(i)}} for i, p in enumerate(prompts)]
    return tool_call("delegate", {"reply": reply, "subtasks": subtasks}, call_id="d1")


def final(text: str, delay: float = 0.0) -> Step:
    return tool_call("final_reply", {"text": text}, call_id="f1", delay=delay)


def ask(question: str, options: Sequence[str] | None = None, call_id: str = "q1") -> Step:
    args: dict[str, Any] = {"question": question}
    if options is not None:
        args["options"] = list(options)
    return tool_call("ask_user", args, call_id=call_id)


def gateway_edge(
    db_url: str,
    kit: GatewayKit,
    rx_url: str,
    db: Database,
    subscribers: Sequence[Subscriber] = (),
) -> AbstractAsyncContextManager[EdgeHarness]:
    """The real edge with its worker in process, pushing to ``rx_url``."""
    storage = open_storage(db)
    runtime = LlmRuntime(
        environ={},
        failure_text="operator text",
        plugins=build_plugins([], {}),
        sessions=storage.sessions,
        subtasks=storage.subtasks,
        subscribers=tuple(subscribers),
    )
    return edge_harness(
        db_url,
        gateway=kit,
        background=True,
        agents=default_registry(runtime),
        gateway_origins=[kit.origin, rx_url],
        **FAST,
    )
