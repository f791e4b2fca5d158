"""A delegating ``llm`` agent's config for tests against the fake model server."""

from __future__ import annotations

from typing import Any

from app.testing.fake_model import FakeModelServer, Step, tool_call

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


def final(text: str) -> Step:
    return tool_call("final_reply", {"text": text}, call_id="f1")
