"""What ``a2a_agents`` shows of the directory: pages of five agents, each with its live card
bounded (its description, at most eight skills, its input and output modes, whether it
streams), framed as remote data, and in a smaller form (skills by id and name only; then only
each agent's names) when a page would not fit the agent's tool output cap."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from a2a.types import AgentCard

from app.peers.answers import CARDS_FRAME, JsonDict, bounded, render

PAGE_SIZE = 5
MAX_SKILLS = 8
MAX_DESCRIPTION = 400  # bytes of a card's description shown
MAX_SKILL_TEXT = 200  # bytes of a skill's name or description shown
MAX_WORD = 64  # bytes of an id, a tag or a mode


def page_of(names: Sequence[str], page: int) -> tuple[Sequence[str], int | None]:
    """The names on ``page`` (from 1) and the next page's number, if there is one."""
    page = max(page, 1)
    start = (page - 1) * PAGE_SIZE
    more = start + PAGE_SIZE < len(names)
    return names[start : start + PAGE_SIZE], page + 1 if more else None


def _text(value: str, limit: int) -> str:
    return bounded(value, limit)[0]


def _words(values: Sequence[str], count: int) -> list[str]:
    return [_text(v, MAX_WORD) for v in values[:count]]


def card_entry(name: str, card: AgentCard) -> JsonDict:
    skills = [
        {
            "id": _text(s.id, MAX_WORD),
            "name": _text(s.name, MAX_SKILL_TEXT),
            "description": _text(s.description, MAX_SKILL_TEXT),
            "tags": _words(s.tags, 5),
        }
        for s in card.skills[:MAX_SKILLS]
    ]
    return {
        "name": name,
        "cardName": _text(card.name, MAX_SKILL_TEXT),
        "description": _text(card.description, MAX_DESCRIPTION),
        "skills": skills,
        "moreSkills": max(0, len(card.skills) - MAX_SKILLS),
        "inputModes": _words(card.default_input_modes, 8),
        "outputModes": _words(card.default_output_modes, 8),
        "streaming": bool(card.capabilities.streaming),
    }


def _compact(card: JsonDict) -> JsonDict:
    return {**card, "skills": [{"id": s["id"], "name": s["name"]} for s in card.get("skills", ())]}


def _minimal(card: JsonDict) -> JsonDict:
    return {k: card[k] for k in ("name", "cardName", "streaming", "error") if k in card}


# Each form of a page, smaller than the one before, and what it adds to the page.
_FORMS: tuple[tuple[Callable[[JsonDict], JsonDict], JsonDict], ...] = (
    (lambda card: card, {}),
    (_compact, {"compact": True}),
    (_minimal, {"compact": True, "minimal": True}),
)


def agents_page(cards: Sequence[JsonDict], next_page: int | None, cap: int) -> str:
    """The page of cards in the first form that fits the agent's tool output cap: whole,
    compact (skills by id and name only), or minimal (each agent's names and streaming)."""
    doc: JsonDict = {"ok": True}
    if next_page is not None:
        doc["nextPage"] = next_page
    text = ""
    for shrink, marks in _FORMS:
        page = {**doc, "agents": [shrink(c) for c in cards], **marks}
        text = render(page, max_bytes=cap, frame=CARDS_FRAME)
        if len(text.encode()) <= cap:
            break
    return text
