"""The PDF extraction child process (issue 55): one PDF on stdin, one JSON answer on stdout.

Started by ``app.attachments.pdf.PdfExtractor`` for each document and killed at its deadline.
Before it reads a byte of the PDF it caps its own address space (``RLIMIT_AS``, so an
allocation past the limit is a ``MemoryError`` here, never memory taken from the edge), its
CPU time (``RLIMIT_CPU``, a second stop beside the parent's deadline), and the files it may
write (none), and it replaces the socket constructors so the parse cannot reach the network.

The answer is ``{"pages": [[label, text], ...]}`` or ``{"refused": reason}``; the parent
turns a reason into the content-type refusal. Only the standard library and ``pypdf`` are
imported here, so the child starts quickly and holds nothing of the edge (no settings, no
keys, no connections: it is started with an empty environment).
"""

from __future__ import annotations

import json
import resource
import socket
import sys
from typing import Any, NoReturn

MAX_PDF_BYTES = 4 * 1024 * 1024
MAX_PDF_PAGES = 32
MAX_PDF_TEXT_BYTES = 128 * 1024
MAX_LABEL_CHARS = 32


def _no_network(*_: object, **__: object) -> NoReturn:
    raise PermissionError("no network access during extraction")


def confine(memory_bytes: int, cpu_seconds: int) -> None:
    """The limits, applied to this process before the PDF is read."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    socket.socket = _no_network  # type: ignore[assignment,misc]
    socket.create_connection = _no_network
    socket.socketpair = _no_network
    socket.getaddrinfo = _no_network


def _label(raw: object, number: int) -> str:
    """The page's label as the PDF names it (ISO 32000 §12.4.2), printable and bounded;
    the page number when it has none."""
    label = "".join(c for c in str(raw) if c.isprintable() and c not in "[]")[:MAX_LABEL_CHARS]
    return label.strip() or str(number)


def _clean(text: str) -> str:
    """Text a database column and a JSON document both carry: no U+0000, no lone
    surrogates."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def extract(data: bytes) -> dict[str, Any]:
    """The answer for one PDF (the limits already applied)."""
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    try:
        reader = PdfReader(_stream(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            return {"refused": "document_encrypted"}
        count = len(reader.pages)
        if count > MAX_PDF_PAGES:
            return {"refused": "document_too_many_pages"}
        labels = _labels(reader, count)
        pages: list[list[str]] = []
        size = 0
        for number, page in enumerate(reader.pages, start=1):
            text = _clean(page.extract_text() or "")
            size += len(text.encode("utf-8")) + len(labels[number - 1]) + 12
            if size > MAX_PDF_TEXT_BYTES:
                return {"refused": "document_text_too_large"}
            pages.append([labels[number - 1], text])
    except LimitReachedError:
        return {"refused": "document_stream_too_large"}
    except MemoryError:
        return {"refused": "document_memory"}
    except Exception:  # RecursionError (deep nesting) included: a PDF we cannot read
        return {"refused": "document_unreadable"}
    if not any(text.strip() for _, text in pages):
        return {"refused": "document_no_text"}  # scanned or blank: no OCR here
    return {"pages": pages}


def _labels(reader: Any, count: int) -> list[str]:
    try:
        labels = list(reader.page_labels)
    except Exception:
        labels = []
    if len(labels) != count:
        return [str(n) for n in range(1, count + 1)]
    return [_label(raw, n) for n, raw in enumerate(labels, start=1)]


def _stream(data: bytes) -> Any:
    from io import BytesIO

    return BytesIO(data)


def main() -> None:
    memory_bytes, cpu_seconds = int(sys.argv[1]), int(sys.argv[2])
    import pypdf  # noqa: F401  (loaded before the address space is capped)

    confine(memory_bytes, cpu_seconds)
    try:
        data = sys.stdin.buffer.read(MAX_PDF_BYTES + 1)
        answer = {"refused": "document_too_large"} if len(data) > MAX_PDF_BYTES else extract(data)
    except MemoryError:
        answer = {"refused": "document_memory"}
    sys.stdout.buffer.write(json.dumps(answer).encode("ascii"))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
