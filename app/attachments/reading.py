"""Reading a message's documents once it is known to be new (issue 55).

Runs after the retry check (a retry of an accepted message is answered with its task before
any document is read again) and before anything is written: a document that fails to read
is refused with ``-32005`` and nothing is half-accepted. Text, Markdown and CSV are decoded
here; a PDF goes to the deployment's extractor (``app.attachments.pdf``: a child process
with a deadline and a memory limit), and the model later gets its page-labelled text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.attachments.documents import decode_document
from app.attachments.pdf import PDF_TYPE, PdfExtractor
from app.attachments.stored import DOCUMENT, Attachment, DocumentText, Incoming
from app.errors import ContentTypeNotSupported


class DocumentReader(Protocol):
    async def read(self, data: bytes, media_type: str, index: int) -> DocumentText:
        """The document's text; ``ContentTypeNotSupported`` (with the reason in its
        metadata) when it cannot be read."""
        ...


class TextDocuments:
    """UTF-8 text, Markdown and CSV (checked at parse time; decoded again here)."""

    async def read(self, data: bytes, media_type: str, index: int) -> DocumentText:
        text = decode_document(data)
        if text is None:
            reason = "document_not_text"
            raise ContentTypeNotSupported(
                f"params.message.parts[{index}]: a document must be non-empty UTF-8 text",
                reason=reason,
                metadata={"attachment": reason, "part": str(index)},
            )
        return DocumentText(text)


class Documents:
    """The deployment's reader: a PDF by ``pdf``'s children, the text types here."""

    def __init__(self, pdf: PdfExtractor) -> None:
        self._pdf = pdf
        self._text = TextDocuments()

    async def read(self, data: bytes, media_type: str, index: int) -> DocumentText:
        if media_type != PDF_TYPE:
            return await self._text.read(data, media_type, index)
        extracted = await self._pdf.extract(data, index)
        return DocumentText(extracted.labelled(), pages=len(extracted.pages))


async def read_attachments(
    incoming: Sequence[Incoming], reader: DocumentReader
) -> tuple[Attachment, ...]:
    """The accepted form of each attachment: images as they are, documents with their text."""
    out: list[Attachment] = []
    for item in incoming:
        text: DocumentText | None = None
        if item.kind == DOCUMENT:
            text = await reader.read(item.data, item.media_type, item.index)
        out.append(
            Attachment(
                index=item.index,
                kind=item.kind,
                media_type=item.media_type,
                filename=item.filename,
                data=item.data,
                text=None if text is None else text.text,
                pages=None if text is None else text.pages,
            )
        )
    return tuple(out)
