"""A user message's attachments as model inputs (issue 55).

The message was checked at acceptance (``app.attachments.images``) and its attachments kept
with the turn (``app.db.attachments``); the message holds only their descriptions, and the
attachments are read from the turn store here (``TurnContext.read_attachments``). An image's
bytes are sniffed again so only JPEG or PNG ever reaches the model; pydantic-ai sends
``BinaryContent`` to an OpenAI-compatible server as an ``image_url`` part with a ``data:`` URL
and nothing is fetched. A model without vision (``model.vision: false``) gets a note that an
image was attached instead. A document reaches the model as its text, framed as untrusted
reference material, never as its bytes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    UserContent,
    UserPromptPart,
)

from app.agents.llm.config import LlmConfig
from app.attachments.descriptions import describe, has_attachments
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


def _images(attachments: Sequence[Attachment], vision: bool) -> list[UserContent]:
    found: list[UserContent] = []
    for item in attachments:
        media_type = sniff_image(item.data) if item.kind == IMAGE else None
        if media_type is None:
            continue
        if vision:
            found.append(BinaryContent(data=item.data, media_type=media_type))
        else:
            found.append(f"The user attached an image this model cannot see: {describe(item)}")
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
) -> UserPromptPart:
    """The user turn for the model: its text, its documents (framed) and its images (or,
    without vision, a note for each), each only while the tenant opts in."""
    documents = _documents(attachments) if config.documents else []
    images = _images(attachments, vision) if config.images else []
    if all(isinstance(i, str) for i in images):
        texts = [text, *documents, *(i for i in images if isinstance(i, str))]
        return UserPromptPart("\n\n".join(texts) if len(texts) > 1 else text)
    content: list[UserContent] = [text, *documents, *images]
    return UserPromptPart(content)


async def user_part(
    text: str, message: Mapping[str, Any], read: ReadAttachments | None, config: LlmConfig
) -> UserPromptPart:
    """``message`` for the model, with the attachments kept with its turn."""
    attachments = await attachments_of(message, read)
    return user_prompt(text, attachments, config.attachments, vision=config.model.vision)


# The session budget's estimate for one image (``session_max_tokens``): its base64 text says
# nothing about what a model charges for it, and must not push the session into compaction.
IMAGE_TOKENS = 1000


def image_allowance(message: ModelMessage) -> tuple[int, int]:
    """(base64 characters of the message's images, tokens to count for them instead)."""
    if not isinstance(message, ModelRequest):
        return 0, 0
    chars = count = 0
    for part in message.parts:
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
            for item in part.content:
                if isinstance(item, BinaryContent):
                    chars += 4 * ((len(item.data) + 2) // 3)
                    count += 1
    return chars, count * IMAGE_TOKENS


def content_text(part: UserPromptPart) -> str:
    """A user part as text (images named, not carried): for summaries."""
    if isinstance(part.content, str):
        return part.content
    return "\n".join(
        item if isinstance(item, str) else f"[image: {getattr(item, 'media_type', 'file')}]"
        for item in part.content
    )
