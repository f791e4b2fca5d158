"""The Looping gateway's turn envelope (CONTRACT §9): each turn's text arrives as
``<turn from="Grace" id="U2" channel="general" at="…Z">hello</turn>``, attribute values
XML-escaped (``& < > "``). Parsed once per turn; every agent gets the inner text and the
attributes as fields of its ``TurnContext``. Text without the envelope is used as is.

A peer agent's turn (CONTRACT §10) is no gateway's: its text is never read as an envelope
(a peer cannot name a gateway user as its sender), and the model sees it headed by the peer's
name and origin from the verified token (issue 54, provenance).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from app.security.caller import PeerSender
from app.text import one_line_json

_ENVELOPE = re.compile(r'\A\s*<turn((?:\s+[A-Za-z_][\w-]*="[^"<]*")*)\s*>(.*)</turn>\s*\Z', re.S)
_ATTRIBUTE = re.compile(r'([A-Za-z_][\w-]*)="([^"<]*)"')


@dataclass(frozen=True)
class TurnEnvelope:
    text: str  # the inner text (the whole text when there was no envelope)
    sender: str | None = None  # ``from``: the sender's display name
    sender_message_id: str | None = None  # ``id``: the platform's message id
    channel: str | None = None
    sent_at: str | None = None  # ``at``: ISO 8601
    peer: PeerSender | None = None  # a peer agent's turn: who sent it (verified token)

    @property
    def wrapped(self) -> bool:
        return self.sender is not None or self.channel is not None

    def for_model(self) -> str:
        """The text as the model sees it: the sender and channel named, faithfully."""
        if self.peer is not None:
            return f"{peer_heading(self.peer)}\n{self.text}"
        if not self.wrapped:
            return self.text
        head = f"[from {self.sender or 'unknown'}"
        if self.channel:
            head += f" in #{self.channel}"
        if self.sent_at:
            head += f" at {self.sent_at}"
        return f"{head}]\n{self.text}"


def peer_heading(peer: PeerSender) -> str:
    """The line that names a peer's turn for the model; the name is the peer's own words, so
    it is quoted as a JSON string (it cannot close the bracket or start a line)."""
    name = one_line_json(peer.name)
    return f"[A2A message from the peer agent {name} at {peer.origin} (verified sender)]"


def turn_envelope(text: str, peer: PeerSender | None) -> TurnEnvelope:
    """A turn's envelope: a peer's text as is, headed by its sender; a gateway's parsed."""
    return TurnEnvelope(text=text, peer=peer) if peer is not None else parse_envelope(text)


def parse_envelope(text: str) -> TurnEnvelope:
    match = _ENVELOPE.match(text)
    if match is None:
        return TurnEnvelope(text=text)
    attrs = {k: html.unescape(v) for k, v in _ATTRIBUTE.findall(match.group(1))}
    return TurnEnvelope(
        text=match.group(2),
        sender=attrs.get("from"),
        sender_message_id=attrs.get("id"),
        channel=attrs.get("channel"),
        sent_at=attrs.get("at"),
    )
