"""The record of negotiations in the loop's system prompt (research §4.5): what happened,
both directions, so the agent can speak about what it negotiated (and which negotiations wait
on its party) whatever it remembers saying."""

from __future__ import annotations

from collections.abc import Sequence

from app.db.negotiations import OUTBOUND, PARKED, Negotiation
from app.negotiation.settlement import canonical

SHOWN = 10
HEADER = (
    "Negotiations you are party to. This is the record of what happened, which is not the same "
    "as what you remember saying — trust it over the conversation above:"
)
RULES = (
    "Only negotiations you opened move when you answer them; for one they opened, your answer "
    "is kept and goes out with your reply to their next move.",
    "Never open a second negotiation with a counterparty you already have one open with about "
    "the same thing: answer or finish that one.",
)


def _detail(row: Negotiation) -> str:
    if row.pending is not None:
        return f'waiting on your guidance: "{row.pending}"'
    if row.verdict is None:
        return f"still open, {row.turns} turns so far"
    terms = f": {canonical(row.terms)}" if row.terms is not None else ""
    return f"{row.verdict}{terms}"


def record(rows: Sequence[Negotiation]) -> str | None:
    """The record of the last ``SHOWN`` negotiations (most recently updated last), or
    ``None`` when there are none."""
    if not rows:
        return None
    lines = [HEADER]
    for row in rows[-SHOWN:]:
        peer = row.detail.get("peer")
        who = f" with {peer}" if isinstance(peer, str) and peer else ""
        way = "you contacted them" if row.direction == OUTBOUND else "they contacted you"
        lines.append(f"- {row.id}{who} ({row.counterparty}) — {way}; {_detail(row)}")
    lines.extend(RULES)
    waiting = [r.id for r in rows if r.pending is not None or r.state == PARKED]
    if waiting:
        lines.append(
            f"Waiting on your party right now: {', '.join(waiting)}. Ask with ask_user, then call "
            "answer with every id the answer applies to — before you report back, not after."
        )
    return "\n".join(lines)
