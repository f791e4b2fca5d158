"""The wire of a negotiation turn: one A2A 1.0 message whose one data part
(``mediaType: application/json``) carries the decision ``{action, message, terms?, offerId?,
acceptsOfferId?}``. The first message of a negotiation names its intent in
``metadata["io.looping.negotiation"]``; continuations carry the ``taskId``.

Offer ids are the edge's, never the model's: every outgoing decision that carries terms gets a
fresh UUID ``offerId`` (accepting moves included) and whatever ``offerId`` the model wrote is
dropped; ``acceptsOfferId`` passes through unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

JsonDict = dict[str, Any]

MEDIA_TYPE = "application/json"
METADATA_KEY = "io.looping.negotiation"
MAX_MESSAGE_CHARS = 8000


class DecisionError(ValueError):
    """Not a usable decision; the message says which field."""


@dataclass(frozen=True)
class Decision:
    action: str
    message: str
    terms: Mapping[str, Any] | None = None
    offer_id: str | None = None
    accepts_offer_id: str | None = None

    def to_data(self) -> JsonDict:
        data: JsonDict = {"action": self.action, "message": self.message}
        if self.terms is not None:
            data["terms"] = dict(self.terms)
        if self.offer_id is not None:
            data["offerId"] = self.offer_id
        if self.accepts_offer_id is not None:
            data["acceptsOfferId"] = self.accepts_offer_id
        return data

    def to_part(self) -> JsonDict:
        """The protobuf-JSON ``Part`` carrying this decision."""
        return {"data": self.to_data(), "mediaType": MEDIA_TYPE}

    def with_offer_id(self, new_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> Decision:
        """The edge's offer id: a fresh one when the move carries terms, none otherwise."""
        return replace(self, offer_id=new_id() if self.terms is not None else None)


def decision_from_data(data: object, *, strict: bool = True) -> Decision:
    """The decision in a data part's value. ``strict``: refuse wrong optional fields
    (``DecisionError``) instead of ignoring them."""
    if not isinstance(data, Mapping):
        raise DecisionError("a decision is a JSON object")
    action, message = data.get("action"), data.get("message")
    if not isinstance(action, str) or not action:
        raise DecisionError("decision.action must be a non-empty string")
    if not isinstance(message, str):
        raise DecisionError("decision.message must be a string")
    terms = data.get("terms")
    if terms is not None and not isinstance(terms, Mapping):
        if strict:
            raise DecisionError("decision.terms must be an object")
        terms = None
    offer_id = _optional_text(data, "offerId", strict)
    accepts = _optional_text(data, "acceptsOfferId", strict)
    return Decision(
        action=action,
        message=message,
        terms=dict(terms) if terms is not None else None,
        offer_id=offer_id,
        accepts_offer_id=accepts,
    )


def _optional_text(data: Mapping[str, Any], name: str, strict: bool) -> str | None:
    value = data.get(name)
    if value is None or (isinstance(value, str) and value):
        return value
    if strict:
        raise DecisionError(f"decision.{name} must be a non-empty string")
    return None


def decision_part(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first data part of a protobuf-JSON message whose value is an object with string
    ``action`` and ``message`` (research §1.2), or ``None``."""
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        data = part.get("data")
        if (
            isinstance(data, Mapping)
            and isinstance(data.get("action"), str)
            and isinstance(data.get("message"), str)
        ):
            return data
    return None


def decision_of(message: Mapping[str, Any]) -> Decision | None:
    """The message's decision, read leniently (a counterparty's odd optional field is
    dropped, not fatal), or ``None`` when it carries none."""
    data = decision_part(message)
    if data is None:
        return None
    try:
        return decision_from_data(data, strict=False)
    except DecisionError:
        return None


def decisions_of(history: Sequence[Mapping[str, Any]]) -> list[Decision]:
    """Every readable decision of a task's history, oldest first."""
    out = []
    for message in history:
        found = decision_of(message)
        if found is not None:
            out.append(found)
    return out


def intent_of(message: Mapping[str, Any]) -> str | None:
    """``metadata["io.looping.negotiation"].intent`` of a negotiation's first message."""
    meta = message.get("metadata")
    block = meta.get(METADATA_KEY) if isinstance(meta, Mapping) else None
    intent = block.get("intent") if isinstance(block, Mapping) else None
    return intent if isinstance(intent, str) else None
