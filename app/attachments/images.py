"""The checks on a message's attachments, before it is accepted (issue 55).

For a tenant that opted in: at most ``MAX_IMAGES`` inline ``raw`` image parts of at most
``MAX_IMAGE_BYTES`` each, JPEG or PNG by their leading bytes (the declared ``mediaType``
must agree, or be absent). A URL part is never fetched and is refused, as is any other media
type: A2A's content-type error (``-32005``) with the reason in ``ErrorInfo.metadata``. The
whole message is checked before anything is written, so nothing is half-accepted.
"""

from __future__ import annotations

from collections.abc import Iterable

from a2a.types import Part

from app.attachments.documents import MAX_DOCUMENTS, check_document, document_type
from app.attachments.policy import AttachmentPolicy
from app.attachments.stored import DOCUMENT, IMAGE, Incoming
from app.errors import ContentTypeNotSupported

MAX_IMAGES = 4
MAX_IMAGE_BYTES = 1024 * 1024

_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"


def sniff_image(data: bytes) -> str | None:
    """``image/png`` or ``image/jpeg`` from the bytes themselves, else ``None``."""
    if data.startswith(_PNG):
        return "image/png"
    if data.startswith(_JPEG):
        return "image/jpeg"
    return None


def _refuse(message: str, reason: str, index: int) -> ContentTypeNotSupported:
    return ContentTypeNotSupported(
        f"params.message.parts[{index}]: {message}",
        reason=reason,
        metadata={"attachment": reason, "part": str(index)},
    )


def check_attachments(parts: Iterable[Part], policy: AttachmentPolicy) -> list[Incoming]:
    """The message's attachments (images and documents), checked; raises
    ``ContentTypeNotSupported`` on the first part the policy refuses. A tenant without the
    opt-in is not checked here (today's rules)."""
    if not policy.any:
        return []
    found: list[Incoming] = []
    for index, part in enumerate(parts):
        kind = part.WhichOneof("content")
        if kind == "url":
            raise _refuse(
                "URL parts are not accepted; send the file inline (raw)",
                "attachment_url_refused",
                index,
            )
        if kind == "raw":
            found.append(_check_raw(part, index, policy))
            _check_counts(found, index)
    return found


def _check_raw(part: Part, index: int, policy: AttachmentPolicy) -> Incoming:
    sniffed = sniff_image(part.raw) if policy.images else None
    declared = part.media_type.strip().lower()
    if sniffed is None and policy.documents and (media_type := document_type(declared)):
        check_document(part.raw, index, media_type)
        return Incoming(index, DOCUMENT, media_type, part.filename, part.raw)
    if sniffed is None:
        raise _refuse("this media type is not accepted", "attachment_type_unsupported", index)
    if declared and declared != sniffed:
        raise _refuse(
            f"declared as {declared[:64]}, but the bytes are {sniffed}",
            "attachment_type_mismatch",
            index,
        )
    if len(part.raw) > MAX_IMAGE_BYTES:
        raise _refuse(
            f"an image may hold at most {MAX_IMAGE_BYTES} bytes", "image_too_large", index
        )
    return Incoming(index, IMAGE, sniffed, part.filename, part.raw)


def _check_counts(found: list[Incoming], index: int) -> None:
    kind = found[-1].kind
    count = sum(1 for f in found if f.kind == kind)
    if kind == IMAGE and count > MAX_IMAGES:
        raise _refuse(f"at most {MAX_IMAGES} images per message", "too_many_images", index)
    if kind == DOCUMENT and count > MAX_DOCUMENTS:
        raise _refuse(f"at most {MAX_DOCUMENTS} document per message", "too_many_documents", index)


def describe_part(part: object) -> str | None:
    """A bounded description of a protobuf-JSON file part (``raw`` or ``url``) for agents
    that read text only: ``[image: image/png, 12345 bytes]``; ``None`` for other parts."""
    if not isinstance(part, dict):
        return None
    raw = part.get("raw")
    if isinstance(raw, str):
        media = str(part.get("mediaType") or "application/octet-stream")[:64]
        size = len(raw) * 3 // 4 - raw[-2:].count("=")
        kind = "image" if media.startswith("image/") else "file"
        return f"[{kind}: {media}, {size} bytes]"
    if isinstance(part.get("url"), str):
        return "[file: url]"
    return None
