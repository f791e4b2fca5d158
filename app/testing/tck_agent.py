"""The agent the A2A TCK expects behind the edge (``scripts/tck``; docs/conformance.md).

The TCK (a2aproject/a2a-tck, ``scenarios/*.feature``) signals the behaviour it wants through
the incoming message's ``messageId`` prefix (``tck-complete-task-…``, ``tck-input-required-…``,
``tck-message-response-…``): no side channel. This agent reads that prefix on every turn,
the start and each resume, as the TCK's own generated agents do, and answers with the
matching result. Registered as a ``python`` agent::

    looping-edge tenants add tck --manifest … --profile open \\
        --agent python --agent-config '{"entry": "app.testing.tck_agent:build"}'

A message id with no known prefix completes the task naming it, like the TCK's own agents.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.agents.contract import (
    AgentFailure,
    AgentQuestion,
    AgentReply,
    AgentResult,
    JsonDict,
    TurnContext,
    TurnStopped,
)

DEFAULT_STREAMING_TIMEOUT_SECONDS = 2.0
"""The TCK's ``TCK_STREAMING_TIMEOUT`` default: the resubscribe scenario works for twice it."""

_FILE_BYTES = base64.b64encode(b"tck").decode("ascii")


def _text(artifact_id: str, text: str) -> JsonDict:
    return {"artifactId": artifact_id, "parts": [{"text": text}]}


_TEXT_FILE: JsonDict = {
    "artifactId": "file",
    "parts": [{"raw": _FILE_BYTES, "filename": "output.txt", "mediaType": "text/plain"}],
}
_URL_FILE: JsonDict = {
    "artifactId": "file-url",
    "parts": [
        {
            "url": "https://example.com/output.txt",
            "filename": "output.txt",
            "mediaType": "text/plain",
        }
    ],
}
_GENERATED = _text("text", "Generated text content")
_DATA: JsonDict = {"artifactId": "data", "parts": [{"data": {"key": "value", "count": 42}}]}


@dataclass(frozen=True)
class Scenario:
    """What one prefix asks for: an optional WORKING step, then the result."""

    result: AgentResult
    working: bool = False  # publish WORKING first (the streaming scenarios)
    linger: bool = False  # stay WORKING for twice the streaming timeout (resubscribe)


def _streamed(*artifacts: JsonDict) -> Scenario:
    return Scenario(AgentReply(artifacts=artifacts), working=True)


# Longest prefix first: ``tck-artifact-file-url`` must not be taken for ``tck-artifact-file``.
SCENARIOS: tuple[tuple[str, Scenario], ...] = (
    ("tck-stream-artifact-chunked", _streamed(_text("chunked", "chunk-1 chunk-2"))),
    ("tck-stream-artifact-text", _streamed(_text("text", "Streamed text content"))),
    ("tck-stream-artifact-file", _streamed(_TEXT_FILE)),
    ("tck-stream-ordering-001", _streamed(_text("ordered", "Ordered output"))),
    ("tck-stream-001", _streamed(_text("stream", "Stream hello from TCK"))),
    ("tck-stream-002", Scenario(AgentReply())),
    ("tck-stream-003", _streamed(_text("lifecycle", "Stream task lifecycle"))),
    ("test-resubscribe-message-id", Scenario(AgentReply(), working=True, linger=True)),
    ("tck-artifact-file-url", Scenario(AgentReply(artifacts=(_URL_FILE,)))),
    ("tck-artifact-file", Scenario(AgentReply(artifacts=(_TEXT_FILE,)))),
    ("tck-artifact-text", Scenario(AgentReply(artifacts=(_GENERATED,)))),
    ("tck-artifact-data", Scenario(AgentReply(artifacts=(_DATA,)))),
    ("tck-message-response", Scenario(AgentReply("Direct message response", as_message=True))),
    ("tck-input-required", Scenario(AgentQuestion("TCK: input required"))),
    ("tck-complete-task", Scenario(AgentReply("Hello from TCK"))),
    ("tck-reject-task", Scenario(AgentFailure("rejected"))),
)


def scenario_for(message_id: str) -> Scenario:
    """The scenario a message id asks for (the TCK's default: complete, naming the id)."""
    for prefix, scenario in SCENARIOS:
        if message_id.startswith(prefix):
            return scenario
    return Scenario(AgentReply(f"Unhandled messageId prefix: {message_id}"))


class TckAgent:
    """Answers each turn as the TCK scenario named by the message id's prefix."""

    def __init__(self, streaming_timeout: float = DEFAULT_STREAMING_TIMEOUT_SECONDS) -> None:
        self._linger = 2 * streaming_timeout

    async def run(self, ctx: TurnContext) -> AgentResult:
        scenario = scenario_for(str(ctx.message.get("messageId", "")))
        if scenario.working:
            await ctx.progress("working", "working")
        if scenario.linger:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ctx.cancelled.wait(), self._linger)
        if ctx.cancelled.is_set():
            raise TurnStopped
        return scenario.result


def build(config: Mapping[str, Any]) -> TckAgent:
    """The ``python`` agent entry: ``{"streaming_timeout": <seconds>}`` is optional."""
    timeout = config.get("streaming_timeout", DEFAULT_STREAMING_TIMEOUT_SECONDS)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout < 0:
        raise ValueError("streaming_timeout must be a non-negative number of seconds")
    return TckAgent(float(timeout))
