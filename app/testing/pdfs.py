"""Small PDFs built in tests (issue 55): ordinary ones and bombs, a few hundred bytes each,
so no binary is committed.

::

    one_page = text_pdf(["Hello from page one"])
    labelled = text_pdf(["Preface", "Body"], labels=("i", "1"))
    many = text_pdf(["x"] * 40)                       # past the page limit
    bomb = flate_bomb_pdf(200_000_000)                # a stream far past pypdf's output limit
    nested = nested_pdf(50_000)                       # arrays nested past the recursion limit
    loop = looping_pdf()                              # a page tree that contains itself
    slow = slow_pdf(32, 20_000)                       # many text operators on every page

Each builder writes the objects, a cross-reference table and a trailer (ISO 32000 §7.5).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence


def build_pdf(objects: Sequence[bytes], *, root: int = 1) -> bytes:
    """A PDF of ``objects`` (object ``n`` is ``objects[n - 1]``, without ``obj``/``endobj``)."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets: list[int] = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\n" % (len(objects) + 1, root)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def _stream(content: bytes, *, compress: bool = False) -> bytes:
    if compress:
        data = zlib.compress(content, 9)
        return (
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + (b"\nendstream")
        )
    return b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"


def _escape(text: str) -> bytes:
    raw = text.encode("latin-1", "replace")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def pages_pdf(
    contents: Sequence[bytes], *, labels: Sequence[str] = (), compress: bool = False
) -> bytes:
    """One page per content stream, with Helvetica as ``/F1``; ``labels`` become the PDF's
    own page labels (``/PageLabels``, one prefix-only range per page)."""
    return _pages([_stream(content, compress=compress) for content in contents], labels)


def _pages(
    streams: Sequence[bytes], labels: Sequence[str] = (), extra: Sequence[bytes] = ()
) -> bytes:
    count = len(streams)
    # 1 catalog, 2 pages, 3 font, then per page: the page and its content stream.
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count))
    catalog = b"<< /Type /Catalog /Pages 2 0 R"
    if labels:
        ranges = b" ".join(
            b"%d << /P (%s) >>" % (i, _escape(label)) for i, label in enumerate(labels)
        )
        catalog += b" /PageLabels << /Nums [" + ranges + b"] >>"
    objects = [
        catalog + b" >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, stream in enumerate(streams):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objects.append(stream)
    return build_pdf([*objects, *extra])


def text_content(text: str) -> bytes:
    return b"BT /F1 12 Tf 72 720 Td (" + _escape(text) + b") Tj ET"


def text_pdf(texts: Sequence[str], *, labels: Sequence[str] = (), padding: int = 0) -> bytes:
    """A PDF whose page ``i`` shows ``texts[i]``; ``padding`` as for ``slow_pdf``."""
    streams = [_stream(text_content(text)) for text in texts]
    return _pages(streams, labels, _padding(padding))


def _padding(size: int) -> list[bytes]:
    """An object no page refers to, of about ``size`` bytes: a larger file, the same text."""
    return [_stream(bytes(range(256)) * (size // 256 + 1))] if size else []


def flate_bomb_pdf(decompressed_bytes: int) -> bytes:
    """One page whose content stream inflates to ``decompressed_bytes`` of spaces (about a
    thousandth of that compressed), compressed a chunk at a time."""
    block = zlib.compressobj(9)
    chunk = b" " * (1024 * 1024)
    data = bytearray()
    for _ in range(decompressed_bytes // len(chunk)):
        data += block.compress(chunk)
    data += block.flush()
    header = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data)
    return _pages([header + bytes(data) + b"\nendstream"])


def nested_pdf(depth: int) -> bytes:
    """A page whose dictionary holds arrays nested ``depth`` deep."""
    nested = b"[" * depth + b"]" * depth
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Deep " + nested + b" >>",
    ]
    return build_pdf(objects)


def looping_pdf() -> bytes:
    """A page tree whose node lists itself among its kids."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
        b"<< /Type /Pages /Kids [2 0 R] /Parent 2 0 R /Count 1 >>",
    ]
    return build_pdf(objects)


def slow_pdf(pages: int, operators: int, *, padding: int = 0) -> bytes:
    """``pages`` pages of ``operators`` tiny text-showing operators each (compressed): much
    work for the extractor, little text. ``padding``: that many more bytes, in an object no
    page refers to (a larger file, the same work)."""
    content = b"BT /F1 1 Tf " + b"1 0 Td () Tj " * operators + b"ET"
    streams = [_stream(content, compress=True)] * pages
    return _pages(streams, extra=_padding(padding))
