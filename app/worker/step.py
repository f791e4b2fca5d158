"""How a turn's run ends (``Step``: drain the next turn or stop), and the result each
finished turn is counted under (``edge_turns_total``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from app.db.mailbox import QueuedTurn
from app.tasks import states


class Verdict(enum.Enum):
    NEXT = "next"  # the turn is settled: drain the identity's next turn
    STOP = "stop"  # lease lost, backoff scheduled or shutdown: release and stop draining


@dataclass(frozen=True)
class Step:
    """How a run ended and, after ``NEXT``, the identity's next due turn as read by the
    statement that settled this one (``mailbox.settle_and_head``; None: nothing due)."""

    verdict: Verdict
    next_turn: QueuedTurn | None = None


STOP = Step(Verdict.STOP)


def result_label(state: str) -> str:
    """The ``edge_turns_total`` result of a turn whose task ended in ``state``."""
    return {
        states.COMPLETED: "completed",
        states.FAILED: "failed",
        states.REJECTED: "rejected",
        states.INPUT_REQUIRED: "input_required",
        states.AUTH_REQUIRED: "input_required",
    }.get(state, "completed")
