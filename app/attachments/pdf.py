"""PDF text extraction for a turn's document (issue 55), in a child process per document.

Parsing hostile bytes never happens in the edge process: each PDF goes to a fresh child
(``app.attachments.pdf_worker``, started with ``python -I`` and an empty environment) that
caps its own address space and CPU time and cannot open a socket; the parent kills it at
the deadline (``EDGE_PDF_DEADLINE_SECONDS``) and runs at most ``MAX_CONCURRENT`` at once
(a semaphore per process: more wait their turn). What comes back is page-labelled text or
the reason it was refused, raised as A2A's content-type error (``-32005``) with the reason
in ``ErrorInfo``: a document that fails to parse is refused, never half-accepted.

The parser is ``pypdf`` (pinned in pyproject.toml): pure Python, so the hostile input meets
memory-safe code, with its own output limits on decompression filters; it runs no scripts,
renders nothing and fetches nothing. See docs/agents-llm.md (attachments).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.attachments.pdf_worker import MAX_PDF_BYTES, MAX_PDF_PAGES, MAX_PDF_TEXT_BYTES
from app.errors import ContentTypeNotSupported

if TYPE_CHECKING:
    from app.settings import Settings

PDF_TYPE = "application/pdf"
PDF_MAGIC = b"%PDF-"
MAX_CONCURRENT = 2
# The most a child may write back: the text limit, JSON-escaped, with room for the labels.
_MAX_ANSWER_BYTES = 8 * MAX_PDF_TEXT_BYTES + 64 * 1024
_ROOT = str(Path(__file__).resolve().parents[2])  # holds the ``app`` package
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[3]); "
    "from app.attachments.pdf_worker import main; main()"
)

REASONS = {
    "document_too_large": f"a PDF may hold at most {MAX_PDF_BYTES} bytes",
    "document_unreadable": "the PDF could not be read",
    "document_encrypted": "the PDF is encrypted",
    "document_too_many_pages": f"a PDF may have at most {MAX_PDF_PAGES} pages",
    "document_text_too_large": f"a PDF may hold at most {MAX_PDF_TEXT_BYTES} bytes of text",
    "document_no_text": "the PDF has no text to extract (scanned or blank pages)",
    "document_stream_too_large": "a stream in the PDF inflates past the parser's limit",
    "document_deadline": "reading the PDF took too long",
    "document_memory": "reading the PDF needed too much memory",
}


@dataclass(frozen=True, slots=True)
class PdfPage:
    label: str  # the PDF's own page label (ISO 32000 §12.4.2), else the page number
    text: str


@dataclass(frozen=True, slots=True)
class PdfText:
    pages: tuple[PdfPage, ...]

    def labelled(self) -> str:
        """The text as the model reads it: each page under ``[page <label>]``."""
        return "\n\n".join(f"[page {page.label}]\n{page.text}" for page in self.pages)


@dataclass(frozen=True, slots=True)
class PdfLimits:
    deadline_seconds: float = 15.0
    memory_bytes: int = 256 * 1024 * 1024  # the child's address space

    @classmethod
    def from_settings(cls, settings: Settings) -> PdfLimits:
        return cls(settings.pdf_deadline_seconds, settings.pdf_memory_bytes)


def refusal(reason: str, index: int) -> ContentTypeNotSupported:
    """The content-type refusal of part ``index`` for ``reason`` (a key of ``REASONS``)."""
    return ContentTypeNotSupported(
        f"params.message.parts[{index}]: {REASONS.get(reason, REASONS['document_unreadable'])}",
        reason=reason,
        metadata={
            "attachment": reason,
            "part": str(index),
            "input": "document",
            "admission": "rejected",
        },
    )


class PdfExtractor:
    """One per process (``EdgeServices.pdf``): the children and their semaphore."""

    def __init__(self, limits: PdfLimits, *, python: str = sys.executable) -> None:
        self.limits = limits
        self._python = python
        self._slots = asyncio.Semaphore(MAX_CONCURRENT)

    async def extract(self, data: bytes, index: int) -> PdfText:
        """The PDF's page-labelled text; raises ``ContentTypeNotSupported`` (reason in
        ``REASONS``) when it cannot be read within the limits."""
        if len(data) > MAX_PDF_BYTES:
            raise refusal("document_too_large", index)
        if not data.startswith(PDF_MAGIC):
            raise refusal("document_unreadable", index)
        async with self._slots:
            answer = await self._run(data)
        pages = _pages(answer.get("pages"))
        if not pages:
            raise refusal(str(answer.get("refused") or "document_unreadable"), index)
        return PdfText(pages)

    async def _run(self, data: bytes) -> dict[str, Any]:
        """The child's answer; the child is killed on the deadline or if the caller goes
        away (a cancelled request leaves no process behind)."""
        cpu_seconds = math.ceil(self.limits.deadline_seconds) + 1
        process = await asyncio.create_subprocess_exec(
            self._python,
            "-I",
            "-c",
            _BOOT,
            str(self.limits.memory_bytes),
            str(cpu_seconds),
            _ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={},
            start_new_session=True,  # its own process group: a kill reaches anything it started
        )
        try:
            async with asyncio.timeout(self.limits.deadline_seconds):
                output, _ = await process.communicate(data)
        except TimeoutError:
            return {"refused": "document_deadline"}
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()  # not yet reaped: the pid is still this child's
                await asyncio.shield(process.wait())
        return _answer(process.returncode, output)


def _pages(found: object) -> tuple[PdfPage, ...]:
    """The answer's ``[[label, text], ...]`` as pages; none when it is not that shape."""
    if not isinstance(found, list):
        return ()
    pages = [
        PdfPage(item[0], item[1])
        for item in found
        if isinstance(item, list) and len(item) == 2 and all(isinstance(v, str) for v in item)
    ]
    return tuple(pages) if len(pages) == len(found) else ()


def _answer(returncode: int | None, output: bytes) -> dict[str, Any]:
    if returncode == -signal.SIGXCPU:
        return {"refused": "document_deadline"}  # its RLIMIT_CPU
    if returncode == -signal.SIGKILL:
        # Not ours (the deadline answered first): the kernel's OOM killer.
        return {"refused": "document_memory"}
    if returncode != 0 or len(output) > _MAX_ANSWER_BYTES:
        return {"refused": "document_unreadable"}
    try:
        answer = json.loads(output)
    except ValueError:
        return {"refused": "document_unreadable"}
    return answer if isinstance(answer, dict) else {"refused": "document_unreadable"}
