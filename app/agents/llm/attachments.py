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

from pydantic_ai.messages import BinaryContent, UserContent, UserPromptPart

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


def user_prompt(text: str, message: Mapping[str, Any], config: AttachmentsConfig) -> UserPromptPart:
    """The user turn for the model: its text, then its images when the tenant opted in."""
    images = images_of(message) if config.images else []
    if not images:
        return UserPromptPart(text)
    content: list[UserContent] = [text, *images]
    return UserPromptPart(content)
