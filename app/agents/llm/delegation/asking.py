"""A round that asks the human (``ask_user``), as the plain loop asks (``app.agents.llm.hitl``).

The round's call is saved to the session (``task:<id>:round:<r>:ask``) before the task goes
``INPUT_REQUIRED`` with the question and the gateway's HITL request part (request id
``ask-<r>-<taskId>``). The answer (the next message on the task) becomes the call's result,
saved as ``task:<id>:round:<r>:results`` naming the answer's message id, and the rounds go on at
``r + 1``. A turn run again before the answer (a takeover) finds the call without a result and
asks the same question again, never the model.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart

from app.agents.contract import AgentQuestion, TurnContext
from app.agents.llm import history, hitl
from app.agents.llm.batch import arguments
from app.agents.llm.session import SessionEntry, message_of
from app.agents.llm.tool_calls import options_of


def ask_suffix(round_no: int) -> str:
    return f"round:{round_no}:ask"


def question(entry: SessionEntry, task_id: str, round_no: int) -> AgentQuestion:
    """The task's question from the round's saved ``ask_user`` call."""
    call = history.calls_of(message_of(entry))[0]
    args = arguments(call)
    text = str(args.get("question") or "") if isinstance(args, dict) else ""
    rid = hitl.request_id(task_id, round_no)
    return AgentQuestion(text=text, parts=(hitl.question_part(rid, text, options_of(call)),))


def answer(entry: SessionEntry, ctx: TurnContext, message_id: str) -> ModelRequest:
    """The round's result: the human's answer (an option's label, the answer's text, or the
    no-answer line), naming the message it came in so it is taken once."""
    call = history.calls_of(message_of(entry))[0]
    given = hitl.answer_of(ctx.message, ctx.turn.text, options_of(call))
    part = ToolReturnPart(
        call.tool_name,
        given.result,
        call.tool_call_id,
        metadata={"answer": message_id},
        timestamp=at(ctx.clock()),
    )
    return ModelRequest(parts=[part])


def waited(asked: ModelMessage, answered: ModelMessage) -> float:
    """Seconds the task waited for the human between a round's question and its answer (not
    counted against the delegation's wall time)."""
    if not isinstance(asked, ModelResponse) or not isinstance(answered, ModelRequest):
        return 0.0
    parts = [p for p in answered.parts if isinstance(p, ToolReturnPart)]
    if not parts:
        return 0.0
    return max(0.0, (parts[0].timestamp - asked.timestamp).total_seconds())


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
