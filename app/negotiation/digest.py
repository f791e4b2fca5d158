"""What the loop learns from ``negotiate`` and ``answer`` (research §4.8): one event per
negotiation, rendered as a digest grouped Settled, Waiting on you, Out of turns, Failed,
Refused, Recorded, Skipped (empty groups left out), one line per negotiation with its outcome
word and its terms or reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.negotiation.settlement import canonical

SETTLED = "settled"
ASKING = "asking"
BUDGET = "budget"
FAILED = "failed"
REFUSED = "refused"
RECORDED = "recorded"
SKIPPED = "skipped"

_HEADINGS = {
    SETTLED: "Settled",
    ASKING: "Waiting on you",
    BUDGET: "Out of turns",
    FAILED: "Failed",
    REFUSED: "Refused",
    RECORDED: "Recorded",
    SKIPPED: "Skipped",
}
_UNANSWERED_HINT = (
    " — the exchange is still open; answer this id with how to respond to their last move, "
    "do not open a new one"
)


@dataclass(frozen=True)
class Event:
    kind: str
    id: str
    peer: str | None = None  # the counterparty's card name
    url: str | None = None  # the counterparty (``<origin>/<tenant>``)
    outcome: str | None = None
    terms: Mapping[str, Any] | None = None
    reason: str | None = None
    question: str | None = None
    last: str | None = None  # their last move, as the line shows it
    turns: int = 0


def last_move(message: str | None, terms: Mapping[str, Any] | None) -> str | None:
    if message is None:
        return None
    shown = f'"{message}"'
    return f"{shown} {canonical(terms)}" if terms is not None else shown


def _line(event: Event) -> str:
    head = f"- {event.id}"
    if event.peer:
        head += f" with {event.peer}"
    if event.url:
        head += f" ({event.url})"
    suffix = f" (their last move: {event.last})" if event.last else ""
    if event.kind == SETTLED:
        if event.outcome is None:
            return f"{head} — ended ({event.reason or 'no settlement'})"
        detail = canonical(event.terms) if event.terms is not None else (event.reason or "")
        hint = _UNANSWERED_HINT if event.outcome == "unanswered" else ""
        return f"{head} — {event.outcome}: {detail}{hint}"
    if event.kind == ASKING:
        return f'{head} — asks: "{event.question}"{suffix}'
    if event.kind == BUDGET:
        return f"{head} — {event.turns} turns, still open{suffix}"
    if event.kind == REFUSED:
        return f"- refused — {event.reason}"
    return f"{head} — {event.reason or ''}"


def digest(events: Sequence[Event]) -> str:
    if not events:
        return "No negotiations."
    blocks = []
    for kind, heading in _HEADINGS.items():
        group = [e for e in events if e.kind == kind]
        if not group:
            continue
        title = f"{heading} ({len(group)}):"
        if kind == ASKING:
            title = (
                f"{heading} ({len(group)}) — ask your party once with ask_user, then call "
                "answer with every id the answer applies to:"
            )
        blocks.append("\n".join([title, *(_line(e) for e in group)]))
    return "\n\n".join(blocks)
