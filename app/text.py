"""Text the edge accepts in a request: valid Unicode without U+0000.

Why a rule of its own: Python's JSON parser accepts escapes that are JSON by its grammar but
not text anyone can store or send back. An unpaired surrogate (``"\\ud800"``) is not a Unicode
scalar value (RFC 8259 §8.2; I-JSON, RFC 7493 §2.1, forbids it) and cannot be encoded as UTF-8,
so answering with it fails; U+0000 is valid JSON but PostgreSQL's ``text`` and ``jsonb``
refuse it, so it failed there as a database error (-32603, which the gateway retries) while
SQLite stored it. Both are refused up front, the same way on both backends.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

# After decoding, a surrogate pair is one astral code point: any surrogate left is unpaired.
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")
# Both can only arrive as \u escapes (raw NUL is not allowed in JSON text, raw surrogates are
# not UTF-8), so a body without such an escape needs no walk: the common case costs one scan.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


_UNSAFE = re.compile(r"[^\x20-\x7e]")


def shown(value: str, limit: int = 64) -> str:
    """A client-supplied value safe to echo in an error message: printable and bounded."""
    cleaned = _UNSAFE.sub("?", value)
    return cleaned if len(cleaned) <= limit else cleaned[:limit] + "..."


def refuse_constant(name: str) -> Any:
    """``parse_constant`` for JSON readers: NaN, Infinity and -Infinity are not JSON numbers
    (RFC 8259 §6), though Python's parser reads them by default."""
    raise ValueError(f"{name} is not a JSON number")


def finite_float(literal: str) -> float:
    """``parse_float`` for JSON readers: a number past a double's range (``1e999``) is not
    read as infinity (RFC 8259 §6: such numbers are not interoperable; I-JSON, RFC 7493 §2.2)."""
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"the number {shown(literal, 24)} is out of range")
    return value


def finite_int(literal: str) -> int:
    """``parse_int`` for JSON readers: an integer past a double's range is refused like
    ``finite_float`` refuses ``1e999`` (JSON numbers become doubles in protobuf's ``Struct`` and
    in most readers), before Python's 4,300-digit limit answers with a message of its own."""
    digits = len(literal) - literal.startswith("-")
    if digits <= 15:  # the common case: below 2**53, no range question
        return int(literal)
    value = int(literal) if digits <= 400 else None
    if value is None or abs(value) > sys.float_info.max:
        raise ValueError(f"the number {shown(literal, 24)} is out of range")
    return value


def is_clean(text: str) -> bool:
    return _BAD_TEXT.search(text) is None


def may_hold_bad_text(body: bytes) -> bool:
    return _SUSPECT_ESCAPE.search(body) is not None


def first_bad_text(value: Any, path: str) -> str | None:
    """The path (``params.message.parts[0].text``) of the first string, member name or value,
    that is not clean text; None when all are. Iterative: a body may nest as deep as the JSON
    parser allows, deeper than a recursive walk could follow from inside a request."""
    if _all_clean(value):
        return None  # the common case (escaped surrogate pairs): no paths built
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not is_clean(item):
                return where
        elif isinstance(item, dict):
            for key in item:
                if not is_clean(key):
                    return f"{where}.<member name>"
            stack.extend((item[key], f"{where}.{key}") for key in reversed(list(item)))
        elif isinstance(item, list):
            stack.extend((item[i], f"{where}[{i}]") for i in range(len(item) - 1, -1, -1))
    return None


def _all_clean(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _BAD_TEXT.search(item) is not None:
                return False
        elif isinstance(item, dict):
            for key, child in item.items():
                if _BAD_TEXT.search(key) is not None:
                    return False
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
    return True


# Characters JSON leaves as they are that still end a line (``str.splitlines``, and many
# readers): escaped too by ``one_line_json``.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def one_line_json(value: Any) -> str:
    """``value`` as compact JSON, non-ASCII kept, on one line whatever it holds: for another
    party's words shown to a model inside a frame or a heading, which they must not end."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_LINE_BREAKS)
