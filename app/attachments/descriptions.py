"""The bounded description an attachment leaves in the task history (issue 55).

The history (GetTask, ListTasks, streams, pushes) and the turn's message carry, in place of
each accepted attachment's part, a text part naming it, with its facts in the part metadata
under ``looping.attachment``: kind, media type, filename, size and (a PDF) pages. The bytes
and a document's text stay with the accepted turn (``app.db.attachments``). Agents that read
text only (echo, scripted) see the description; the ``llm`` agent reads the attachment
itself from the turn store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.attachments.stored import Attachment

MARKER = "looping.attachment"
MAX_FILENAME = 128


def clean_filename(filename: str) -> str:
    """A filename safe to show in a description: printable, without quotes or brackets,
    bounded."""
    shown = "".join(c for c in filename if c.isprintable() and c not in '"<>[]')
    return shown[:MAX_FILENAME]


def describe(attachment: Attachment) -> str:
    """``[image: photo.png, image/png, 12345 bytes]`` (``, 3 pages`` for a PDF)."""
    facts = [attachment.media_type, f"{attachment.size} bytes"]
    if attachment.pages is not None:
        facts.append(f"{attachment.pages} page" + ("" if attachment.pages == 1 else "s"))
    name = clean_filename(attachment.filename)
    return f"[{attachment.kind}: {', '.join([name, *facts] if name else facts)}]"


def facts(attachment: Attachment) -> dict[str, Any]:
    found: dict[str, Any] = {
        "kind": attachment.kind,
        "mediaType": attachment.media_type,
        "size": attachment.size,
    }
    name = clean_filename(attachment.filename)
    if name:
        found["filename"] = name
    if attachment.pages is not None:
        found["pages"] = attachment.pages
    return found


def described_part(attachment: Attachment) -> dict[str, Any]:
    """The protobuf-JSON text part that stands for ``attachment`` in the history."""
    return {"text": describe(attachment), "metadata": {MARKER: facts(attachment)}}


def described_message(
    message: Mapping[str, Any], attachments: Sequence[Attachment]
) -> dict[str, Any]:
    """``message`` with each attachment's part replaced by its description (the part's own
    metadata is not kept: the description is bounded)."""
    at = {a.index: a for a in attachments}
    parts = [
        described_part(at[i]) if i in at else part
        for i, part in enumerate(message.get("parts") or ())
    ]
    return {**message, "parts": parts}


def is_description(part: object) -> bool:
    """Whether a protobuf-JSON part is an attachment's description."""
    if not isinstance(part, Mapping):
        return False
    metadata = part.get("metadata")
    return isinstance(metadata, Mapping) and isinstance(metadata.get(MARKER), Mapping)


def has_attachments(message: Mapping[str, Any]) -> bool:
    return any(is_description(p) for p in message.get("parts") or ())


def descriptions_of(message: Mapping[str, Any]) -> list[str]:
    """The description texts of a message's attachments, in order."""
    return [str(p.get("text") or "") for p in message.get("parts") or () if is_description(p)]
