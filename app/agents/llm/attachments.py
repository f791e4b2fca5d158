"""A user message's attachments as model inputs (issue 55).

The message was checked at acceptance (``app.attachments.images``) and its attachments kept
with the turn (``app.db.attachments``); the message holds only their descriptions, and the
attachments are read from the turn store here (``TurnContext.read_attachments``). An image's
bytes are sniffed again so only JPEG or PNG ever reaches the model; pydantic-ai sends
``BinaryContent`` to an OpenAI-compatible server as an ``image_url`` part with a ``data:`` URL
and nothing is fetched. A model without vision (``model.vision: false``) gets a note that an
image was attached instead. A document reaches the model as its text, framed as untrusted
reference material, never as its bytes.

The user turn has two forms (``UserTurn``): the model gets the images in the turn they came
with (and in a re-run of that turn, read from the turn store again); the caller's session
keeps each image as its bounded description, so later turns neither carry its bytes in the
session nor send it to the model again. A document's text stays in the session (bounded per
message, counted in the session's budget and compacted with it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    UserContent,
    UserPromptPart,
)

from app.agents.llm.config import LlmConfig
from app.attachments.descriptions import MARKER, describe, has_attachments, is_description
from app.attachments.documents import MAX_DOCUMENTS, framed
from app.attachments.images import MAX_IMAGES, sniff_image
from app.attachments.policy import AttachmentsConfig
from app.attachments.stored import DOCUMENT, IMAGE, Attachment

ReadAttachments = Callable[[str], Awaitable[Sequence[Attachment]]]


async def attachments_of(
    message: Mapping[str, Any], read: ReadAttachments | None
) -> Sequence[Attachment]:
    """The attachments kept with ``message``'s turn; none when it describes none."""
    message_id = message.get("messageId")
    if read is None or not isinstance(message_id, str) or not has_attachments(message):
        return ()
    return await read(message_id)


# What the session keeps of an image after its turn: its description and this hint.
EARLIER = "attached in an earlier turn; not shown again"


@dataclass(frozen=True)
class UserTurn:
    """``live``: the user turn as the model gets it now (images as inputs); ``kept``: as the
    session keeps it (each image as its description). The same part when it has no image."""

    live: UserPromptPart
    kept: UserPromptPart


def _images(attachments: Sequence[Attachment], vision: bool) -> list[tuple[UserContent, str]]:
    """(what the model gets now, the text the session keeps) for each image."""
    found: list[tuple[UserContent, str]] = []
    for item in attachments:
        media_type = sniff_image(item.data) if item.kind == IMAGE else None
        if media_type is None:
            continue
        if vision:
            image = BinaryContent(data=item.data, media_type=media_type)
            found.append((image, f"{describe(item)} ({EARLIER})"))
        else:
            note = f"The user attached an image this model cannot see: {describe(item)}"
            found.append((note, note))
        if len(found) == MAX_IMAGES:
            break
    return found


def _documents(attachments: Sequence[Attachment]) -> list[str]:
    docs = [a for a in attachments if a.kind == DOCUMENT and a.text is not None]
    return [framed(a.text or "", a.media_type, a.filename) for a in docs[:MAX_DOCUMENTS]]


def user_prompt(
    text: str,
    attachments: Sequence[Attachment],
    config: AttachmentsConfig,
    *,
    vision: bool = True,
) -> UserTurn:
    """The user turn: its text, its documents (framed) and its images (or, without vision, a
    note for each), each only while the tenant opts in."""
    documents = _documents(attachments) if config.documents else []
    images = _images(attachments, vision) if config.images else []
    texts = [text, *documents, *(kept for _, kept in images)]
    kept = UserPromptPart("\n\n".join(texts) if len(texts) > 1 else text)
    if all(isinstance(live, str) for live, _ in images):
        return UserTurn(kept, kept)
    return UserTurn(UserPromptPart([text, *documents, *(live for live, _ in images)]), kept)


async def user_part(
    text: str, message: Mapping[str, Any], read: ReadAttachments | None, config: LlmConfig
) -> UserTurn:
    """``message`` for the model, with the attachments kept with its turn."""
    attachments = await attachments_of(message, read)
    return user_prompt(text, attachments, config.attachments, vision=config.model.vision)


def has_images(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` describes an image kept with its turn."""
    return any(
        is_description(p) and p["metadata"][MARKER].get("kind") == IMAGE
        for p in message.get("parts") or ()
    )


def content_text(part: UserPromptPart) -> str:
    """A user part as text (images named, not carried): for summaries."""
    if isinstance(part.content, str):
        return part.content
    return "\n".join(
        item if isinstance(item, str) else f"[image: {getattr(item, 'media_type', 'file')}]"
        for item in part.content
    )
