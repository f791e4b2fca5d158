"""PDF text extraction in its child process (issue 55): page-labelled text, and every bomb
refused with its reason while the edge process's memory stays bounded and its loop free."""

from __future__ import annotations

import asyncio
import io
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pypdf import PdfWriter

from app.attachments.pdf import PdfExtractor, PdfLimits
from app.attachments.pdf_worker import MAX_PDF_BYTES
from app.errors import ContentTypeNotSupported
from app.testing.pdfs import flate_bomb_pdf, looping_pdf, nested_pdf, pages_pdf, slow_pdf, text_pdf

pytestmark = pytest.mark.slow  # each PDF starts a child process

MiB = 1024 * 1024


async def _refused(data: bytes, limits: PdfLimits | None = None) -> ContentTypeNotSupported:
    with pytest.raises(ContentTypeNotSupported) as caught:
        await PdfExtractor(limits or PdfLimits()).extract(data, 3)
    error = caught.value
    assert error.code == -32005
    assert error.metadata["attachment"] == error.reason
    assert error.metadata["part"] == "3"
    assert error.metadata["input"] == "document"
    return error


async def test_pages_are_labelled() -> None:
    extractor = PdfExtractor(PdfLimits())
    one = await extractor.extract(text_pdf(["Hello from page one"]), 0)
    assert one.labelled() == "[page 1]\nHello from page one"
    # The PDF's own page labels when it has them (ISO 32000 §12.4.2).
    own = await extractor.extract(text_pdf(["Preface", "Body"], labels=("iv", "A-1")), 0)
    assert own.labelled() == "[page iv]\nPreface\n\n[page A-1]\nBody"
    # A label cannot forge another page's marker.
    forged = await extractor.extract(text_pdf(["x"], labels=("1]\n[page 9",)), 0)
    assert forged.labelled() == "[page 1page 9]\nx"


async def test_refusals() -> None:
    assert (await _refused(text_pdf(["x"] * 33))).reason == "document_too_many_pages"
    assert (await _refused(nested_pdf(50_000))).reason == "document_unreadable"
    assert (await _refused(looping_pdf())).reason == "document_unreadable"
    assert (await _refused(b"%PDF-1.7\nnot a pdf")).reason == "document_unreadable"
    assert (await _refused(b"GIF89a")).reason == "document_unreadable"
    assert (await _refused(pages_pdf([b""]))).reason == "document_no_text"
    assert (await _refused(b"%PDF-" + bytes(MAX_PDF_BYTES))).reason == "document_too_large"
    much = "word " * 30_000  # 150 000 bytes of text on one page
    assert (await _refused(text_pdf([much]))).reason == "document_text_too_large"


async def test_encrypted_pdf_is_refused_and_owner_only_is_read() -> None:
    def encrypted(user_password: str) -> bytes:
        writer = PdfWriter(clone_from=io.BytesIO(text_pdf(["secret"])))
        writer.encrypt(user_password, "owner", algorithm="RC4-128")
        out = io.BytesIO()
        writer.write(out)
        return out.getvalue()

    assert (await _refused(encrypted("user"))).reason == "document_encrypted"
    read = await PdfExtractor(PdfLimits()).extract(encrypted(""), 0)
    assert read.pages[0].text == "secret"


async def test_decompression_bomb_is_refused_in_the_child() -> None:
    bomb = flate_bomb_pdf(200 * MiB)
    assert len(bomb) < MAX_PDF_BYTES
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert (await _refused(bomb)).reason == "document_stream_too_large"
    # Just under pypdf's output limit: inflated in the child, whose memory grew, not ours.
    assert (await _refused(flate_bomb_pdf(70 * MiB))).reason == "document_no_text"
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 16 * 1024
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss > 70 * 1024


async def test_memory_limit() -> None:
    limits = PdfLimits(memory_bytes=96 * MiB)
    assert (await _refused(flate_bomb_pdf(70 * MiB), limits)).reason == "document_memory"
    # The same limit reads an ordinary PDF.
    assert (await PdfExtractor(limits).extract(text_pdf(["fine"]), 0)).pages[0].text == "fine"


async def test_deadline_kills_the_child_and_the_loop_stays_free() -> None:
    limits = PdfLimits(deadline_seconds=0.5)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    error = await _refused(slow_pdf(32, 20_000), limits)
    elapsed = time.monotonic() - started
    ticker.cancel()
    assert error.reason == "document_deadline"
    assert elapsed < 3
    assert ticks > 10  # the event loop served other work meanwhile


async def test_at_most_two_children_at_once_and_none_sees_our_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDGE_DATABASE_URL", "postgresql://edge:secret@db/edge")
    log = tmp_path / "children.log"
    environ = tmp_path / "environ"
    wrapper = tmp_path / "python"
    wrapper.write_text(
        f'#!/bin/sh\necho start >> {log}\nenv >> {environ}\n{sys.executable} "$@"\nrc=$?\n'
        f"echo end >> {log}\nexit $rc\n"
    )
    wrapper.chmod(0o755)
    extractor = PdfExtractor(PdfLimits(), python=str(wrapper))
    pdfs = [text_pdf([f"page of document {n}"]) for n in range(5)]
    results = await asyncio.gather(*(extractor.extract(pdf, 0) for pdf in pdfs))
    assert [r.pages[0].text for r in results] == [f"page of document {n}" for n in range(5)]
    running = peak = 0
    for line in log.read_text().split():
        running += 1 if line == "start" else -1
        peak = max(peak, running)
    assert peak == 2
    assert "secret" not in environ.read_text() and "EDGE_" not in environ.read_text()


def test_the_child_cannot_open_a_socket() -> None:
    probe = (
        "from app.attachments.pdf_worker import confine\n"
        "confine(256 * 1024 * 1024, 5)\n"
        "import socket\n"
        "for make in (lambda: socket.socket(), lambda: socket.create_connection(('127.0.0.1', 9)),"
        " lambda: socket.getaddrinfo('localhost', 80)):\n"
        "    try:\n"
        "        make()\n"
        "    except PermissionError:\n"
        "        continue\n"
        "    raise SystemExit('reached the network')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr


def _pdf_children() -> list[int]:
    """This process's children that run the PDF worker."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"pdf_worker" in cmdline:
            found.append(int(proc.name))
    return found


async def test_a_cancelled_caller_leaves_no_child() -> None:
    extractor = PdfExtractor(PdfLimits(deadline_seconds=30))
    task = asyncio.create_task(extractor.extract(slow_pdf(32, 20_000), 0))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if _pdf_children():
            break
    assert _pdf_children()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _pdf_children() == []
