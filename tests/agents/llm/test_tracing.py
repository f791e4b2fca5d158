"""The llm loop's spans (issue 53): a model call with gen_ai attributes and token counts and
no prompt text unless EDGE_TRACE_MODEL_CONTENT allows it; a tool call by name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.agents.llm.plugins import build_plugins
from app.settings import load_settings
from app.testing.fake_model import FakeModelServer, text, tool_call
from app.tracing import provider
from tests.agents.llm.kit import run_turn, runtime, turn
from tests.agents.llm.test_loop import ALL, Tools


def _traced(**settings: object) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing = provider.install(load_settings(**settings), SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        tracing.shutdown()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    yield from _traced()


@pytest.fixture
def spans_with_content() -> Iterator[InMemorySpanExporter]:
    yield from _traced(trace_model_content=True)


async def test_model_and_tool_calls_are_spans_without_prompt_text(
    fake: FakeModelServer, spans: InMemorySpanExporter
) -> None:
    plugins = build_plugins([Tools()], {})
    fake.script(tool_call("lookup", {"q": 7}), text("found it", prompt_tokens=12))
    await run_turn(fake, runtime(plugins=plugins), turn("secret prompt"), tools=ALL)
    finished = spans.get_finished_spans()
    chats = [s for s in finished if s.name.startswith("chat ")]
    assert len(chats) == 2
    last = chats[-1].attributes or {}
    assert last["gen_ai.operation.name"] == "chat"
    assert last["gen_ai.request.model"] == chats[-1].name.removeprefix("chat ")
    assert last["gen_ai.usage.input_tokens"] == 12
    assert "gen_ai.usage.output_tokens" in last
    (tool,) = [s for s in finished if s.name == "execute_tool lookup"]
    assert (tool.attributes or {})["gen_ai.tool.name"] == "lookup"
    for span in finished:
        assert "secret prompt" not in str(dict(span.attributes or {}))


async def test_the_content_setting_lets_the_prompt_into_the_span(
    fake: FakeModelServer, spans_with_content: InMemorySpanExporter
) -> None:
    fake.script(text("hello back"))
    await run_turn(fake, runtime(), turn("secret prompt"))
    (chat,) = [s for s in spans_with_content.get_finished_spans() if s.name.startswith("chat ")]
    attributes = chat.attributes or {}
    assert "secret prompt" in str(attributes["gen_ai.input.messages"])
    assert "hello back" in str(attributes["gen_ai.output.messages"])
