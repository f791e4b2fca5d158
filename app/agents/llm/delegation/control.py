"""The round's control tools and the reading of the model's answer to a round.

Each round the model must call exactly one control tool: ``final_reply(text)``,
``delegate(reply, subtasks)`` with 1..``max_subtasks`` subtasks ``{type, prompt, params}``
(``type``: a recipe key), or ``ask_user(question, options?)`` (the task waits for its human;
the plain loop's tool, offered to the coordinator only, never to a subagent). The final round
offers only ``final_reply``. Anything else (prose, another tool, two calls, arguments that do
not fit) is a failed attempt; ``read`` says what was wrong in fixed wording, which a repair
attempt sends back to the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.tools import ToolDefinition

from app.agents.llm import hitl
from app.agents.llm.batch import arguments
from app.agents.llm.delegation.config import DelegationConfig
from app.db.subtasks import NewSubtask

FINAL_REPLY = "final_reply"
DELEGATE = "delegate"
ASK_USER = hitl.ASK_USER
MAX_PARAMS = 32
MAX_OPTIONS = 16


@dataclass(frozen=True)
class FinalReply:
    text: str


@dataclass(frozen=True)
class Delegate:
    reply: str
    subtasks: tuple[NewSubtask, ...]
    call: ToolCallPart


@dataclass(frozen=True)
class Ask:
    question: str
    options: tuple[str, ...] | None
    call: ToolCallPart


Decision = FinalReply | Delegate | Ask


def definitions(config: DelegationConfig, *, final: bool) -> list[ToolDefinition]:
    """The control tools of a round (the last round: ``final_reply`` only)."""
    reply = ToolDefinition(
        name=FINAL_REPLY,
        parameters_json_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
    )
    if final:
        return [reply]
    subtask = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": [r.key for r in config.recipes]},
            "prompt": {"type": "string"},
            "params": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["type", "prompt"],
        "additionalProperties": False,
    }
    delegate = ToolDefinition(
        name=DELEGATE,
        parameters_json_schema={
            "type": "object",
            "properties": {
                "reply": {"type": "string"},
                "subtasks": {
                    "type": "array",
                    "items": subtask,
                    "minItems": 1,
                    "maxItems": config.max_subtasks,
                },
            },
            "required": ["reply", "subtasks"],
            "additionalProperties": False,
        },
    )
    ask = ToolDefinition(
        name=ASK_USER,
        description=hitl.ASK_USER_TOOL.description,
        parameters_json_schema=hitl.ASK_USER_TOOL.schema,
    )
    return [reply, delegate, ask]


def read(response: ModelResponse, config: DelegationConfig, *, final: bool) -> Decision | str:
    """The round's decision, or what was wrong with the answer (for a repair attempt)."""
    allowed = [FINAL_REPLY] if final else [FINAL_REPLY, DELEGATE, ASK_USER]
    calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
    if not calls:
        return f"error: answer by calling one tool ({' or '.join(allowed)}), not in prose"
    if len(calls) > 1:
        return "error: call exactly one tool per answer"
    call = calls[0]
    if call.tool_name not in allowed:
        name = call.tool_name[:100]
        return f"error: there is no tool named '{name}' now; call {' or '.join(allowed)}"
    args = arguments(call)
    if isinstance(args, str):
        return args
    if call.tool_name == FINAL_REPLY:
        text = args.get("text")
        if not isinstance(text, str) or not text.strip():
            return "error: final_reply needs a non-empty 'text'"
        return FinalReply(text)
    if call.tool_name == ASK_USER:
        return _ask(call, args)
    return _delegate(call, args, config)


def _ask(call: ToolCallPart, args: dict[str, Any]) -> Decision | str:
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        return "error: ask_user needs a non-empty 'question'"
    extra = set(args) - {"question", "options"}
    if extra:
        return f"error: ask_user has no field '{sorted(extra)[0][:64]}'"
    options = args.get("options")
    if options is None:
        return Ask(question, None, call)
    if (
        not isinstance(options, list)
        or len(options) > MAX_OPTIONS
        or not all(isinstance(o, str) and o.strip() for o in options)
    ):
        return f"error: ask_user 'options' must be at most {MAX_OPTIONS} non-empty strings"
    return Ask(question, tuple(options), call)


def _delegate(call: ToolCallPart, args: dict[str, Any], config: DelegationConfig) -> Decision | str:
    reply = args.get("reply")
    if not isinstance(reply, str) or not reply.strip():
        return "error: delegate needs a non-empty 'reply'"
    items = args.get("subtasks")
    if not isinstance(items, list) or not 1 <= len(items) <= config.max_subtasks:
        return f"error: delegate needs 1 to {config.max_subtasks} subtasks"
    subtasks = []
    for index, item in enumerate(items):
        problem = _subtask_problem(item, config)
        if problem is not None:
            return f"error: subtasks[{index}]: {problem}"
        params = {str(k): str(v) for k, v in (item.get("params") or {}).items()}
        subtasks.append(NewSubtask(item["type"], item["prompt"], params))
    return Delegate(reply, tuple(subtasks), call)


def _subtask_problem(item: Any, config: DelegationConfig) -> str | None:
    if not isinstance(item, dict):
        return "must be an object"
    extra = set(item) - {"type", "prompt", "params"}
    if extra:
        return f"unknown field '{sorted(extra)[0][:64]}'"
    kind = item.get("type")
    if not isinstance(kind, str) or config.recipe(kind) is None:
        keys = ", ".join(r.key for r in config.recipes)
        return f"'type' must be one of: {keys}"
    prompt = item.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return "needs a non-empty 'prompt'"
    params = item.get("params")
    if params is not None and (
        not isinstance(params, dict)
        or len(params) > MAX_PARAMS
        or not all(isinstance(v, str) for v in params.values())
    ):
        return f"'params' must be an object of at most {MAX_PARAMS} string values"
    return None


def subtasks_of(call: ToolCallPart) -> Sequence[NewSubtask]:
    """The subtasks a saved (already checked) delegate call named."""
    args = arguments(call)
    if isinstance(args, str):
        return ()
    return tuple(
        NewSubtask(str(i["type"]), str(i["prompt"]), dict(i.get("params") or {}))
        for i in args.get("subtasks") or ()
        if isinstance(i, dict)
    )


def reply_of(call: ToolCallPart) -> str | None:
    args = arguments(call)
    reply = None if isinstance(args, str) else args.get("reply")
    return reply if isinstance(reply, str) and reply.strip() else None
