"""An accepted attachment as it is kept with its turn (issue 55): the bytes, and a document's
text (page-labelled for a PDF), for the agent at turn time. The task history carries only its
bounded description (``app.attachments.descriptions``)."""

from __future__ import annotations

from dataclasses import dataclass

IMAGE = "image"
DOCUMENT = "document"


@dataclass(frozen=True, slots=True)
class Incoming:
    """A checked inline attachment of a message, before it is accepted."""

    index: int  # the part's position in the message
    kind: str  # IMAGE | DOCUMENT
    media_type: str  # images: as sniffed; documents: the declared type, normalised
    filename: str
    data: bytes


@dataclass(frozen=True, slots=True)
class DocumentText:
    """What a document reader made of a document: the text the model gets, and for a paged
    document (PDF) its page count."""

    text: str
    pages: int | None = None


@dataclass(frozen=True, slots=True)
class Attachment:
    """An accepted attachment: ``text`` is a document's text (None for an image)."""

    index: int
    kind: str
    media_type: str
    filename: str
    data: bytes
    text: str | None = None
    pages: int | None = None

    @property
    def size(self) -> int:
        return len(self.data)
