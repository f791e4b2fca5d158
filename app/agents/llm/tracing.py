"""The llm loop's spans (issue 53): one per model call and one per tool call, named and
attributed after the OpenTelemetry GenAI semantic conventions (``gen_ai.*``).

Prompt and answer text never leave in a span unless the operator allows it
(EDGE_TRACE_MODEL_CONTENT); token counts and model names always do.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from opentelemetry.trace import Span, SpanKind
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse

from app.tracing.spans import model_content, span

TOOL_OUTCOME = "looping_edge.tool.outcome"


def model_span(model: str, attempt: int, *, fallback: bool) -> AbstractContextManager[Span]:
    """``chat <model>``: one request to an OpenAI-compatible chat endpoint."""
    return span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "looping_edge.model.attempt": attempt,
            "looping_edge.model.fallback": fallback,
        },
    )


def record_response(
    current: Span, messages: Sequence[ModelMessage], response: ModelResponse
) -> None:
    """Token counts and the answering model; the text only with EDGE_TRACE_MODEL_CONTENT."""
    if not current.is_recording():
        return
    usage = response.usage
    current.set_attributes(
        {
            "gen_ai.usage.input_tokens": usage.input_tokens or 0,
            "gen_ai.usage.output_tokens": usage.output_tokens or 0,
        }
    )
    if response.model_name:
        current.set_attribute("gen_ai.response.model", response.model_name)
    if response.finish_reason:
        current.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
    if model_content():
        current.set_attribute(
            "gen_ai.input.messages", ModelMessagesTypeAdapter.dump_json(list(messages)).decode()
        )
        current.set_attribute(
            "gen_ai.output.messages", ModelMessagesTypeAdapter.dump_json([response]).decode()
        )


def tool_span(name: str, call_id: str) -> AbstractContextManager[Span]:
    """``execute_tool <name>``: one tool call (its arguments and result are not recorded)."""
    return span(
        f"execute_tool {name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
        },
    )
