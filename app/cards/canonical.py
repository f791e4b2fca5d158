"""The canonical form of an Agent Card: the exact bytes its signature covers (A2A §8.4.1).

Rule (CONTRACT §4): drop ``signatures``; drop fields ``a2a.proto`` does not define (parse into
``a2a.types.AgentCard`` and serialise back with protobuf-JSON, which is also what verifiers such
as the a2a-sdk do); recursively drop empty strings, arrays, objects and nulls (``false`` and
``0`` stay); then RFC 8785 JCS.

One deliberate difference from the letter of A2A §8.4.1, which keeps *empty REQUIRED* fields:
we prune every empty value, like the reference edge. Because every card we serve is a
protobuf-JSON fixed point (``wire_form``), an empty string or array never appears in a served
document, so a verifier applying either rule computes the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import rfc8785
from a2a.types import AgentCard
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError

# a2a.utils._jcs refuses deeper documents; so do we, before recursion can hurt.
MAX_DEPTH = 128


class CardFormatError(ValueError):
    """A card that protobuf-JSON or JCS cannot represent; the message is safe to show."""


def prune_empty(value: Any, depth: int = 1) -> Any:
    """Recursively drop ``""``, ``[]``, ``{}`` and ``None``; ``None`` means "dropped".

    ``False`` and ``0`` are values, not absence: ``capabilities.streaming: false`` is signed.
    """
    if isinstance(value, dict | list) and depth > MAX_DEPTH:
        raise CardFormatError(f"card nesting exceeds {MAX_DEPTH} levels")
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            pruned = prune_empty(item, depth + 1)
            if pruned is not None:
                kept[key] = pruned
        return kept or None
    if isinstance(value, list):
        items = [p for p in (prune_empty(item, depth + 1) for item in value) if p is not None]
        return items or None
    if value == "":
        return None
    return value


def jcs(value: Any) -> bytes:
    """RFC 8785 JSON Canonicalization Scheme (UTF-8 bytes)."""
    try:
        return bytes(rfc8785.dumps(value))
    except (rfc8785.CanonicalizationError, TypeError, ValueError):
        raise CardFormatError("card cannot be canonicalised (RFC 8785)") from None


def _to_proto(card: Mapping[str, Any], *, ignore_unknown: bool) -> AgentCard:
    try:
        parsed: AgentCard = ParseDict(dict(card), AgentCard(), ignore_unknown_fields=ignore_unknown)
    except (ParseError, TypeError, ValueError):
        raise CardFormatError("card does not match the a2a.proto AgentCard") from None
    return parsed


def wire_form(card: Mapping[str, Any]) -> dict[str, Any]:
    """The protobuf-JSON form of ``card``: what we serve, and a fixed point of re-encoding.

    Unknown fields are refused here (not silently dropped): a field we build but the proto
    does not know would be served unsigned.
    """
    result: dict[str, Any] = MessageToDict(_to_proto(card, ignore_unknown=False))
    return result


def canonical_dict(card: Mapping[str, Any]) -> dict[str, Any]:
    """The card as signed, before JCS: known fields only, no signatures, no empties."""
    unsigned = {key: value for key, value in card.items() if key != "signatures"}
    known: dict[str, Any] = MessageToDict(_to_proto(unsigned, ignore_unknown=True))
    known.pop("signatures", None)
    pruned = prune_empty(known)
    return pruned if isinstance(pruned, dict) else {}


def canonical_payload(card: Mapping[str, Any]) -> bytes:
    """The JWS payload of a card signature (A2A §8.4.1, CONTRACT §4)."""
    return jcs(canonical_dict(card))
