"""The ListTasks page token: an opaque keyset cursor over ``(created_at, id)``.

base64url of JSON ``[created_at ISO-8601, task id]``; opaque to clients, and a forged one can
only move within the caller's own tasks (every page query is scoped first).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

from app.db.documents import as_utc
from app.errors import InvalidParams
from app.text import is_clean


def encode_cursor(created_at: datetime, task_id: str) -> str:
    raw = json.dumps([as_utc(created_at).isoformat(), task_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii").rstrip("=")


def decode_cursor(token: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode((token + "=" * (-len(token) % 4)).encode("ascii"))
        stamp, task_id = json.loads(raw)
        if not isinstance(stamp, str) or not isinstance(task_id, str) or not is_clean(task_id):
            raise ValueError
        return as_utc(datetime.fromisoformat(stamp)), task_id
    # OverflowError: a stamp at the edge of the calendar moved out of range by its offset.
    # RecursionError: a token of deeply nested arrays, which the JSON parser follows down.
    except (ValueError, TypeError, OverflowError, UnicodeError, RecursionError, binascii.Error):
        raise InvalidParams("params.pageToken is not a valid page token") from None
