"""A message's PDFs read before it is accepted (issue 55): a PDF that cannot be read within
the limits refuses the whole message with the content-type error, before anything is
written, so nothing is half-accepted.

Runs after ``app.attachments.images.check_attachments`` (sizes, counts, magic bytes), on the
normalised protobuf-JSON message (``SendRequest.message``: ``raw`` is base64 there).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from app.attachments.documents import document_type
from app.attachments.pdf import PDF_TYPE, PdfExtractor, PdfText, refusal
from app.attachments.policy import AttachmentPolicy


async def read_pdfs(
    message: Mapping[str, Any], policy: AttachmentPolicy, extractor: PdfExtractor
) -> dict[int, PdfText]:
    """The message's PDFs by part index, read; ``ContentTypeNotSupported`` on the first
    that cannot be. Nothing for a tenant without documents."""
    if not policy.documents:
        return {}
    found: dict[int, PdfText] = {}
    for index, part in enumerate(message.get("parts") or ()):
        if not isinstance(part, Mapping) or not isinstance(part.get("raw"), str):
            continue
        if document_type(str(part.get("mediaType") or "")) != PDF_TYPE:
            continue
        try:
            data = base64.b64decode(part["raw"], validate=True)
        except (binascii.Error, ValueError):
            raise refusal("document_unreadable", index) from None
        found[index] = await extractor.extract(data, index)
    return found
