"""The task and context ids a call to a peer may carry. On HTTP+JSON an id is a URL path
segment (``/tasks/{id}``), so an id is refused when it could leave that segment: ``/``,
``?``, ``#``, ``%`` and spaces are not allowed, and neither is an id of dots only (``.`` and
``..`` are dot segments, removed by URL normalisation, RFC 3986 §5.2.4, so the request would
reach another path). Ids the model gives are checked before any request; so is the task id a
peer acknowledges a send with, before it is followed."""

from __future__ import annotations

import re

from app.errors import PeerCallFailed

_ID = re.compile(r"(?!\.+\Z)[A-Za-z0-9._:~@+=-]{1,256}")


def is_safe_id(value: str) -> bool:
    return _ID.fullmatch(value) is not None


def check_ids(*ids: str | None) -> None:
    """``PeerCallFailed`` ``bad_id`` when one of ``ids`` could leave its path segment."""
    for value in ids:
        if value is not None and not is_safe_id(value):
            raise PeerCallFailed(
                "a task or context id is letters, digits and . _ : ~ @ + = - only (not dots alone)",
                reason="bad_id",
                delivered=False,
            )
