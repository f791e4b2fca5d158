"""A user message's images as model inputs (issue 55).

The message was checked at acceptance (``app.attachments.images``); the bytes are sniffed
again here so only JPEG or PNG ever reaches the model, whatever the stored ``mediaType``
says. pydantic-ai sends ``BinaryContent`` to an OpenAI-compatible server as an
``image_url`` part with a ``data:`` URL; nothing is fetched.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    UserContent,
    UserPromptPart,
)

from app.attachments.documents import MAX_DOCUMENTS, decode_document, framed, text_document_type
from app.attachments.images import MAX_IMAGES, sniff_image
from app.attachments.policy import AttachmentsConfig


def images_of(message: Mapping[str, Any]) -> list[BinaryContent]:
    """The message's inline images, at most ``MAX_IMAGES``, by their bytes."""
    found: list[BinaryContent] = []
    for part in message.get("parts") or ():
        raw = part.get("raw") if isinstance(part, Mapping) else None
        if not isinstance(raw, str):
            continue
        try:
            data = base64.b64decode(raw, validate=False)
        except (binascii.Error, ValueError):
            continue
        media_type = sniff_image(data)
        if media_type is not None:
            found.append(BinaryContent(data=data, media_type=media_type))
        if len(found) == MAX_IMAGES:
            break
    return found


def documents_of(message: Mapping[str, Any]) -> list[str]:
    """The message's text documents, framed as untrusted reference material (a PDF's
    text is read at acceptance, not from its bytes here)."""
    found: list[str] = []
    for part in message.get("parts") or ():
        raw = part.get("raw") if isinstance(part, Mapping) else None
        media_type = text_document_type(str(part.get("mediaType") or "")) if raw else None
        if not isinstance(raw, str) or media_type is None:
            continue
        try:
            data = base64.b64decode(raw, validate=False)
        except (binascii.Error, ValueError):
            continue
        text = None if sniff_image(data) else decode_document(data)
        if text is not None:
            found.append(framed(text, media_type, str(part.get("filename") or "")))
        if len(found) == MAX_DOCUMENTS:
            break
    return found


def user_prompt(text: str, message: Mapping[str, Any], config: AttachmentsConfig) -> UserPromptPart:
    """The user turn for the model: its text, its documents (framed) and its images, each
    only when the tenant opted in."""
    documents = documents_of(message) if config.documents else []
    images = images_of(message) if config.images else []
    if not images and not documents:
        return UserPromptPart(text)
    if not images:
        return UserPromptPart("\n\n".join([text, *documents]))
    content: list[UserContent] = [text, *documents, *images]
    return UserPromptPart(content)


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
