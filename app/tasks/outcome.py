"""What a turn ends with, handed by the worker to ``TurnWrites.finish``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.tasks import states


@dataclass(frozen=True)
class TurnOutcome:
    """``state`` is one of ``states.OUTCOMES``.

    ``text`` and/or ``parts`` (protobuf-JSON ``Part`` dicts) form the agent's message put in
    ``status.message`` and the history; ``artifacts`` (protobuf-JSON ``Artifact`` dicts) are
    appended to the task. ``message_key`` overrides the key of the agent message id
    (``<taskId>:<key>``); by default a terminal outcome uses ``final`` and an interruption
    ``interrupt-<history seq>`` so a second question on the same task is a distinct push.
    """

    state: str
    text: str | None = None
    parts: tuple[dict[str, Any], ...] = ()
    artifacts: tuple[dict[str, Any], ...] = ()
    message_key: str | None = None


# The key of a Message result's message (``<taskId>:message``, issue 49): an open tenant's
# agent answered with a Message, which a blocking SendMessage returns instead of the Task.
# Gateway tenants never get it: their final message stays ``<taskId>:final`` (CONTRACT §7).
MESSAGE_RESULT_KEY = "message"


def message_result(task: dict[str, Any]) -> dict[str, Any] | None:
    """The Message a completed task answered with, if its agent gave a Message result."""
    status = task.get("status") or {}
    message = status.get("message")
    if status.get("state") != states.COMPLETED or not isinstance(message, dict):
        return None
    expected = f"{task.get('id')}:{MESSAGE_RESULT_KEY}"
    return message if message.get("messageId") == expected else None


def outcome_message_key(state: str, history_seq: int) -> str:
    """The key of an outcome's agent message (message id ``<taskId>:<key>``) when the outcome
    names none: ``final`` for a terminal outcome (CONTRACT §7). An interruption can happen
    several times on one task; its key carries the history position of the question, so each
    one is a distinct push (the gateway drops a repeated message id as a duplicate), yet a
    retried turn that writes the same question at the same position reuses it."""
    return "final" if states.is_terminal(state) else f"interrupt-{history_seq}"
