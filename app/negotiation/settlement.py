"""Settlement (research §2): ``verify_agreement`` reads the task alone, so both parties
compute the same verdict from the same input; ``settle`` adds the one case the task cannot
speak to (this side closed and the other carried on) and a prose fallback for decisions
without structured terms, labelled as the weak evidence it is.

Both are computed by both sides after every round trip: outbound with ``mine_first`` (my
send, their reply), inbound without (my reply, their incoming move). Terms are compared as
canonical JSON (keys sorted, arrays in order). Basis, weakest to strongest: ``prose``,
``state``, ``terms``, ``reference``; only ``agreed`` on ``reference`` may gate an
irreversible action.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.db.states import AUTH_REQUIRED, COMPLETED, INPUT_REQUIRED, SUBMITTED, WORKING
from app.negotiation.decision import Decision

BASIS_ORDER = ("prose", "state", "terms", "reference")
OUTCOMES = ("agreed", "declined", "conflict", "unconfirmed", "unanswered")
_OPEN = frozenset({SUBMITTED, WORKING, INPUT_REQUIRED, AUTH_REQUIRED})
# A number after $, € or £, or one followed by a currency word (research §2.3).
_AMOUNT = re.compile(
    r"(?:[$€£]\s?(\d[\d,]*(?:\.\d+)?))|(?:\b(\d[\d,]*(?:\.\d+)?)\s?(?:euros?|dollars?|pounds?|usd|eur|gbp)\b)",
    re.IGNORECASE,
)


def state_word(state: str) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input-required``: the reason strings' spelling."""
    return state.removeprefix("TASK_STATE_").lower().replace("_", "-")


def canonical(value: Any) -> str:
    """Order-independent JSON: keys sorted, integral floats as integers (460.0 == 460)."""
    return json.dumps(_normal(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    return value


def same_terms(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    return canonical(a) == canonical(b)


@dataclass(frozen=True)
class Agreement:
    """``status``: agreed, declined, open, conflict or unconfirmed."""

    status: str
    basis: str
    reason: str | None = None
    terms: Mapping[str, Any] | None = None


def verify_agreement(state: str, decisions: Sequence[Decision]) -> Agreement:
    """The verdict of a task in ``state`` whose history holds ``decisions`` (oldest first)."""
    if state in _OPEN:
        return Agreement("open", "state", f"task is still {state_word(state)}")
    if state != COMPLETED:
        return Agreement("declined", "state", f"task ended as {state_word(state)}")
    if not decisions:
        return Agreement("unconfirmed", "state", "task completed with no readable decisions")
    closing = decisions[-1]
    previous = decisions[-2] if len(decisions) > 1 else None
    if closing.accepts_offer_id:
        accepted = next((d for d in decisions if d.offer_id == closing.accepts_offer_id), None)
        if accepted is None:
            return Agreement(
                "conflict",
                "reference",
                f'closing move accepted offer "{closing.accepts_offer_id}", which appears '
                "nowhere in this task",
            )
        if closing.terms is not None and not same_terms(closing.terms, accepted.terms):
            return Agreement(
                "conflict",
                "reference",
                "closing move's own terms differ from the offer it accepted",
            )
        return Agreement("agreed", "reference", terms=accepted.terms)
    if (
        closing.terms is not None
        and previous is not None
        and previous.terms is not None
        and not same_terms(closing.terms, previous.terms)
    ):
        return Agreement(
            "conflict",
            "terms",
            "the two closing moves name different terms and neither references the other's offer",
        )
    if closing.terms is not None:
        return Agreement("agreed", "terms", terms=closing.terms)
    return Agreement(
        "unconfirmed",
        "state",
        "task completed, but no decision carried structured terms — pass DecideOptions.terms "
        "to make acceptance verifiable",
    )


@dataclass(frozen=True)
class Settlement:
    outcome: str  # one of OUTCOMES
    basis: str
    reason: str
    mine: Decision
    theirs: Decision | None
    terms: Mapping[str, Any] | None = None
    disputed: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # prose: (mine, theirs)

    @property
    def binds_irreversibly(self) -> bool:
        """The gate for tools that act irreversibly (research §2.4)."""
        return self.outcome == "agreed" and self.basis == "reference"

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"outcome": self.outcome, "basis": self.basis, "reason": self.reason}
        if self.terms is not None:
            doc["terms"] = dict(self.terms)
        if self.disputed is not None:
            doc["disputed"] = {"mine": list(self.disputed[0]), "theirs": list(self.disputed[1])}
        return doc


def amounts_in(text: str) -> tuple[float, ...]:
    """The amounts a closing statement names, de-duplicated, in order of appearance."""
    found: list[float] = []
    for match in _AMOUNT.finditer(text):
        raw = (match.group(1) or match.group(2) or "").replace(",", "")
        try:
            value = float(raw)
        except ValueError:
            continue
        if value not in found:
            found.append(value)
    return tuple(found)


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _unanswered(mine: Decision, theirs: Decision | None, *, mine_first: bool) -> str:
    """Why one side's closing move settled nothing: the other did not close too."""
    if theirs is None:
        return (
            f'You closed with "{mine.action}", but they sent no readable reply. Nothing is agreed.'
        )
    if mine_first:
        return (
            f'You closed with "{mine.action}", but they replied with "{theirs.action}" '
            "rather than closing too. Nothing is agreed until they do."
        )
    return (
        f'They closed with "{theirs.action}", but you replied with "{mine.action}" '
        "rather than closing too. Nothing is agreed until you do."
    )


def settle(
    state: str,
    decisions: Sequence[Decision],
    mine: Decision,
    theirs: Decision | None,
    *,
    mine_first: bool,
    is_terminal: Callable[[str], bool],
) -> Settlement | None:
    """What the exchange settled on after one round trip, or ``None`` while nobody closed."""
    agreement = verify_agreement(state, decisions)

    def made(outcome: str, basis: str, reason: str, **extra: Any) -> Settlement:
        return Settlement(outcome, basis, reason, mine, theirs, **extra)

    if agreement.status == "open":
        if not is_terminal(mine.action) and not (theirs and is_terminal(theirs.action)):
            return None
        return made("unanswered", "state", _unanswered(mine, theirs, mine_first=mine_first))
    if agreement.status == "unconfirmed":
        ours = amounts_in(mine.message)
        yours = amounts_in(theirs.message if theirs is not None else "")
        if ours and yours and not set(ours) & set(yours):
            reason = (
                f"You closed on {'/'.join(map(_number, ours))} and they closed on "
                f"{'/'.join(map(_number, yours))}. Both of you said yes, to different numbers "
                "— this is not an agreement. Reopen it and settle on one."
            )
            return made("conflict", "prose", reason, disputed=(ours, yours))
        return made("unconfirmed", agreement.basis, agreement.reason or "")
    default = (
        "Both sides closed on the same terms."
        if agreement.status == "agreed"
        else f"The exchange ended: {agreement.status}."
    )
    return made(
        agreement.status, agreement.basis, agreement.reason or default, terms=agreement.terms
    )
