"""What a turn ends with, handed by the worker to ``TurnWrites.finish``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
