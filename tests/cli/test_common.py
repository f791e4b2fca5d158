"""Helpers shared by the CLI commands."""

from __future__ import annotations

import pytest

from app.cli.common import printable


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("Demo agent", "Demo agent"),
        ("Agente español 😀", "Agente español 😀"),
        ("red \x1b[31m", "red \\x1b[31m"),
        ("two\nlines\r", "two\\nlines\\r"),
        ("rtl \u202e txt", "rtl \\u202e txt"),
        ("c1 \x9b", "c1 \\x9b"),
        ("line sep \u2028", "line sep \\u2028"),
    ],
)
def test_printable_escapes_what_would_split_or_restyle_a_terminal_row(
    stored: str, shown: str
) -> None:
    # Found by audit: `tenants list` printed a manifest name's ESC sequence as it was.
    assert printable(stored) == shown
