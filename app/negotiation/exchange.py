"""What both directions share: a task's moves from one side's view, the reply to a move,
a move's outcome as the responder's task state, and a settlement as a store change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.agents.contract import AgentQuestion, AgentReply, AgentResult
from app.db.negotiations import ENDED, OPEN, Change
from app.db.states import CANCELED, COMPLETED, FAILED, INPUT_REQUIRED, REJECTED
from app.negotiation.decision import Decision, decision_of
from app.negotiation.negotiator import Move
from app.negotiation.settlement import Settlement

AGENT_ROLES = frozenset({"ROLE_AGENT", "agent"})
USER_ROLES = frozenset({"ROLE_USER", "user"})

JsonDict = dict[str, Any]
TERMINAL = frozenset({COMPLETED, FAILED, CANCELED, REJECTED})


def is_terminal(state: str) -> bool:
    return state in TERMINAL


def moves_of(history: Sequence[Mapping[str, Any]], *, responder: bool) -> tuple[Move, ...]:
    """Every readable move of a task, ``mine`` from this side's view (the responder's moves
    are the agent's, the initiator's the user's)."""
    mine_roles = AGENT_ROLES if responder else USER_ROLES
    out = []
    for message in history:
        decision = decision_of(message)
        if decision is not None:
            out.append(Move(message.get("role") in mine_roles, decision))
    return tuple(out)


def user_moves(history: Sequence[Mapping[str, Any]]) -> int:
    """The initiator's moves so far (research §1.7: the budget is counted from the task)."""
    return sum(1 for m in history if m.get("role") in USER_ROLES and decision_of(m) is not None)


def reply_after(task: Mapping[str, Any], message_id: str) -> Mapping[str, Any] | None:
    """The responder's message that answered ``message_id`` in ``task``."""
    history = [m for m in task.get("history") or () if isinstance(m, Mapping)]
    after = False
    for message in history:
        if message.get("messageId") == message_id:
            after = True
        elif after and message.get("role") in AGENT_ROLES:
            return message
    status = task.get("status")
    found = status.get("message") if isinstance(status, Mapping) else None
    return found if isinstance(found, Mapping) and after else None


def task_state(task: Mapping[str, Any]) -> str:
    status = task.get("status")
    return str(status.get("state")) if isinstance(status, Mapping) else ""


def written_state(state: str) -> str:
    """What a turn may write: ``CANCELED`` is CancelTask's alone, so a withdrawing move ends
    the task ``REJECTED`` (both are "declined" to ``verify_agreement``)."""
    return REJECTED if state == CANCELED else state


def result_of(decision: Decision, state: str) -> AgentResult:
    """The responder's move as the turn's result: the decision as the one data part."""
    part = decision.to_part()
    if state == INPUT_REQUIRED:
        return AgentQuestion(text="", parts=(part,))
    return AgentReply(parts=(part,), rejected=state == REJECTED)


def last_offer(decision: Decision | None) -> JsonDict | None:
    if decision is None or decision.terms is None:
        return None
    return {"offerId": decision.offer_id, "terms": dict(decision.terms)}


def settled_change(
    state: str,
    settlement: Settlement | None,
    *,
    turns: int,
    budget_spent: bool,
    **extra: Any,
) -> Change:
    verdict: dict[str, Any]
    """The row after a round trip: ended with the task, a verdict once settled (or out of
    turns while open: ``unanswered``)."""
    if settlement is not None:
        verdict = dict(
            verdict=settlement.outcome,
            basis=settlement.basis,
            reason=settlement.reason,
            terms=dict(settlement.terms) if settlement.terms is not None else None,
        )
    elif budget_spent and not is_terminal(state):
        verdict = dict(
            verdict="unanswered",
            basis="state",
            reason=f"Out of turns after {turns}; nothing is agreed.",
            terms=None,
        )
    else:
        verdict = {}
    return Change(
        state=ENDED if is_terminal(state) else OPEN,
        task_state=state,
        turns=turns,
        **verdict,
        **extra,
    )
