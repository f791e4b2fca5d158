"""A Python negotiator for tests (``negotiation.negotiator: "module:function"``)."""

from __future__ import annotations

from typing import Any

from app.negotiation.negotiator import View


async def accept_last_offer(view: View) -> dict[str, Any]:
    """Accept the counterparty's last offer by its id, with its terms."""
    theirs = [m.decision for m in view.moves if not m.mine and m.decision.terms is not None]
    last = theirs[-1]
    return {
        "action": "accept",
        "message": f"Deal, {view.party}.",
        "terms": dict(last.terms or {}),
        "acceptsOfferId": last.offer_id,
        "offerId": "written-by-the-negotiator",
    }
